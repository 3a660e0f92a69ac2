package wire

// Modes of a request.
const (
	ModeRender = "render" // run Argv over the input, return the files in OutputDir
	ModeProbe  = "probe"  // report the sandbox's isolation properties
)

// Fixed paths inside the sandbox. They live on the job's private tmpfs.
const (
	InputDir  = "/tmp/in"
	OutputDir = "/tmp/out"
	WorkDir   = "/tmp/work"
)

// RendererUID and RendererGID are what every renderer process runs as. The
// agent runs as another uid (sandbox.AgentUID) and starts each renderer
// process with these, so that no renderer can signal, trace or read it.
const (
	RendererUID = 65534
	RendererGID = 65534
)

// Request is the first frame the host sends. InputSize bytes of TypeInput
// frames follow it.
type Request struct {
	Mode string `json:"mode"`
	// Argv is run without a shell; Argv[0] is an absolute path in the rootfs.
	// It is shorthand for a single step.
	Argv []string `json:"argv,omitempty"`
	// Steps run in order, each without a shell; the first failure ends the
	// job. Used when Argv is empty.
	Steps []Step `json:"steps,omitempty"`
	// Browser, when set, drives Chromium over the DevTools pipe after the
	// steps.
	Browser *Browser `json:"browser,omitempty"`
	// Office, when set, has LibreOffice convert a document after the steps.
	Office *Office `json:"office,omitempty"`
	// After run in order once the browser or the office conversion has
	// succeeded, as the steps do (office-pdf's merge of several
	// documents).
	After []Step `json:"after,omitempty"`
	// Unpack, when set, has the input (a ZIP) unpacked before the steps,
	// by a process that runs as the renderer.
	Unpack *Unpack `json:"unpack,omitempty"`
	// Env is the renderer's whole environment (KEY=value).
	Env []string `json:"env,omitempty"`
	// InputName is the file name the input is written to under InputDir.
	InputName string `json:"input_name,omitempty"`
	InputSize int64  `json:"input_size"`
	// MaxOutputBytes and MaxOutputFiles bound what the agent sends back; the
	// host enforces its own caps regardless.
	MaxOutputBytes int64 `json:"max_output_bytes"`
	MaxOutputFiles int   `json:"max_output_files"`
	// MaxTasks is the RLIMIT_NPROC the agent starts the job's renderer
	// with (0: the sandbox's own); at most the sandbox's.
	MaxTasks uint64 `json:"max_tasks,omitempty"`
	// StderrTail is how many bytes of the renderer's stdout+stderr to keep.
	StderrTail int           `json:"stderr_tail,omitempty"`
	Probe      *ProbeRequest `json:"probe,omitempty"`
}

// Step is one program the agent runs.
type Step struct {
	Argv []string `json:"argv"`
	// Stdout, if set, is a file under /tmp that receives the program's
	// standard output; otherwise it joins the stderr tail.
	Stdout string `json:"stdout,omitempty"`
	// Stdin, if set, is a file whose content the program reads on its
	// standard input (the job's input, for a program started before the
	// request: see WarmExec); otherwise its stdin is empty.
	Stdin string `json:"stdin,omitempty"`
}

// Unpack is a ZIP archive to unpack into a directory. Entries are files
// and directories with names ValidSitePath accepts; anything else (a
// symlink, an encrypted entry, a name that climbs out) fails the job, as do
// more than MaxFiles files or MaxBytes bytes, counted as written.
type Unpack struct {
	Archive  string `json:"archive"`
	Dir      string `json:"dir"`
	MaxFiles int    `json:"max_files"`
	MaxBytes int64  `json:"max_bytes"`
}

// Browser is a page for Chromium to load and print or capture. The agent
// serves Page, and the files under Site if there is one, from the page's
// own origin: every other request (network, file, another job's path)
// fails.
type Browser struct {
	// Argv is Chromium and its fixed flags; the agent adds the DevTools pipe.
	Argv []string `json:"argv"`
	// Page is the HTML file under /tmp to serve as the page.
	Page string `json:"page"`
	// Site, when set, is a directory under /tmp whose files the page may
	// load from its origin, by their paths in it.
	Site string `json:"site,omitempty"`
	// PagePath is the page's own path on its origin ("" for "/"): a page
	// from Site is served at its path there, so its relative links work.
	PagePath string `json:"page_path,omitempty"`
	// URL, when set, is what the page is: Chromium navigates to it, and
	// it and every request the page makes are put to the host (TypeFetch),
	// which fetches them or refuses; Page and Site are then unused.
	URL string `json:"url,omitempty"`
	// Wait says what to wait for between the page's load and its print.
	Wait *Wait `json:"wait,omitempty"`
	// OmitBackground prints or captures without the default white
	// background (transparent where the page sets none).
	OmitBackground bool `json:"omit_background,omitempty"`
	// SinglePage prints the whole page on one sheet as tall as its content.
	SinglePage bool `json:"single_page,omitempty"`
	// FailOnResourceError fails the job when the page asked for anything
	// it could not have (refused or missing); FailOnConsoleError when it
	// logged an error or threw an uncaught exception.
	FailOnResourceError bool `json:"fail_on_resource_error,omitempty"`
	FailOnConsoleError  bool `json:"fail_on_console_error,omitempty"`
	// Media is the emulated CSS media type: "print", "screen" or "".
	Media string `json:"media,omitempty"`
	// MediaFeatures are emulated CSS media features
	// (prefers-color-scheme: dark, …).
	MediaFeatures []MediaFeature `json:"media_features,omitempty"`
	// UserAgent, when set, is what the page sees as its User-Agent; the
	// host sends it with a URL page's requests.
	UserAgent string `json:"user_agent,omitempty"`
	// JavaScript disabled when false.
	JavaScript bool `json:"javascript"`
	// Output is the file name written under OutputDir.
	Output     string      `json:"output"`
	PDF        *PDFOptions `json:"pdf,omitempty"`
	Screenshot *Screenshot `json:"screenshot,omitempty"`
}

// MediaFeature is one emulated CSS media feature.
type MediaFeature struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Wait is what the agent waits for after the page's load event, all within
// TimeoutMS: first DelayMS, then until Selector matches an element, then
// until Expression (JavaScript) is true.
type Wait struct {
	DelayMS    int    `json:"delay_ms,omitempty"`
	Selector   string `json:"selector,omitempty"`
	Expression string `json:"expression,omitempty"`
	TimeoutMS  int    `json:"timeout_ms"`
}

// Office formats a conversion may produce.
const OfficePDF = "pdf"

// Office is a document for LibreOffice to convert, with macros off and no
// links updated. The agent picks the program and its flags itself; a
// sandbox booted ahead of the job has LibreOffice already running and only
// converts. The output is OutDir/<Input's name without its extension>.<Format>.
type Office struct {
	// Input is the document, a file in InputDir.
	Input string `json:"input,omitempty"`
	// Parts, instead of Input, are several documents under /tmp (an
	// unpacked archive's files) converted in order by one LibreOffice,
	// part n (from 1) to OutDir/part-n.<Format>; a part whose Convert is
	// false is already a PDF and is linked there as it is.
	Parts []OfficePart `json:"parts,omitempty"`
	// OutDir is the directory under /tmp that receives the output.
	OutDir string `json:"out_dir"`
	// Format is the output format: OfficePDF.
	Format string `json:"format"`
	// Options are the conversion's settings; nil is LibreOffice's defaults.
	Options *OfficeOptions `json:"options,omitempty"`
}

// OfficePart is one of several documents to convert.
type OfficePart struct {
	Path    string `json:"path"`
	Convert bool   `json:"convert,omitempty"`
}

// OfficeOptions are how a document is opened and exported to PDF (the PDF
// export's FilterData: PageRange, Quality, ReduceImageResolution and
// MaxImageResolution, SinglePageSheets, ExportFormFields).
type OfficeOptions struct {
	// Password opens an encrypted document. It is a secret: nothing that
	// handles it logs it or puts it in an error.
	Password string `json:"password,omitempty"`
	// Encrypted says the input's bytes are a password-protected document
	// (the host's sniffing found it), so that a failed load can say a
	// password is needed rather than guess.
	Encrypted bool `json:"encrypted,omitempty"`
	// Landscape turns every page style (slides and drawing pages in
	// presentations and drawings) landscape.
	Landscape bool `json:"landscape,omitempty"`
	// PageRange selects pages, "1-3,5"; empty is all.
	PageRange string `json:"page_range,omitempty"`
	// Quality is the JPEG quality of images in the PDF, 1–100.
	Quality int `json:"quality,omitempty"`
	// MaxImageResolution, when > 0, reduces images to this many DPI.
	MaxImageResolution int `json:"max_image_resolution,omitempty"`
	// SinglePageSheets puts each spreadsheet sheet on one page.
	SinglePageSheets bool `json:"single_page_sheets,omitempty"`
	// ExportFormFields keeps form fields as PDF form fields.
	ExportFormFields bool `json:"export_form_fields"`
	// PDFUA exports PDF/UA-1 (tagged, the title shown, pdfuaid in XMP).
	PDFUA bool `json:"pdf_ua,omitempty"`
	// PDFA exports PDF/A of this part, level b: "1", "2" or "3"; "" a
	// plain PDF.
	PDFA string `json:"pdf_a,omitempty"`
}

// PDFOptions are Page.printToPDF's parameters; lengths in inches.
type PDFOptions struct {
	Landscape         bool    `json:"landscape,omitempty"`
	PrintBackground   bool    `json:"printBackground,omitempty"`
	Scale             float64 `json:"scale,omitempty"`
	PaperWidth        float64 `json:"paperWidth,omitempty"`
	PaperHeight       float64 `json:"paperHeight,omitempty"`
	MarginTop         float64 `json:"marginTop"`
	MarginBottom      float64 `json:"marginBottom"`
	MarginLeft        float64 `json:"marginLeft"`
	MarginRight       float64 `json:"marginRight"`
	PageRanges        string  `json:"pageRanges,omitempty"`
	PreferCSSPageSize bool    `json:"preferCSSPageSize,omitempty"`
	// Header and footer: templates with the classes date, title, url,
	// pageNumber and totalPages filled in by Chromium.
	DisplayHeaderFooter bool   `json:"displayHeaderFooter,omitempty"`
	HeaderTemplate      string `json:"headerTemplate,omitempty"`
	FooterTemplate      string `json:"footerTemplate,omitempty"`
	GenerateOutline     bool   `json:"generateDocumentOutline,omitempty"`
	GenerateTaggedPDF   bool   `json:"generateTaggedPDF"`
}

// Screenshot is a capture of the page.
type Screenshot struct {
	Width             int     `json:"width"`
	Height            int     `json:"height"`
	FullPage          bool    `json:"full_page,omitempty"`
	DeviceScaleFactor float64 `json:"device_scale_factor,omitempty"`
	Format            string  `json:"format"` // png, jpeg or webp
	Quality           int     `json:"quality,omitempty"`
	// Clip, when set, captures only this rectangle of the page, in CSS
	// pixels; Selector, when set, only the first element it matches.
	Clip     *Rect  `json:"clip,omitempty"`
	Selector string `json:"selector,omitempty"`
	// MaxPixels bounds width × height × scale² of a full-page capture.
	MaxPixels int64 `json:"max_pixels"`
}

// Rect is a rectangle in CSS pixels.
type Rect struct {
	X, Y, Width, Height float64
}

// ProbeRequest asks the probe for active checks beyond the passive report.
type ProbeRequest struct {
	// Dial lists TCP addresses the probe tries to connect to; from inside
	// the sandbox every one of them must fail.
	Dial []string `json:"dial,omitempty"`
	// FillTmp, when > 0, makes the probe write up to this many bytes under
	// /tmp and report how far it got (the tmpfs must stop it earlier).
	FillTmp int64 `json:"fill_tmp,omitempty"`
	// Escape makes the probe try, from a child process as a renderer
	// would, what an attacker would: ptrace the agent, mount, become root,
	// raw and packet sockets, write the rootfs, see the host's processes,
	// exhaust processes.
	Escape bool `json:"escape,omitempty"`
}

// Attempt is one escape attempt; Error empty means it succeeded.
type Attempt struct {
	Name   string `json:"name"` // one of EscapeAttempts
	Error  string `json:"error,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Processes is how many processes EscapeProcesses started, Bytes how
	// many bytes EscapeFillTmp wrote: the host compares them with the
	// sandbox's limits.
	Processes uint64 `json:"processes,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
}

// FileHeader announces an output file; Size bytes of TypeData frames follow.
type FileHeader struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// Result is the last frame of a response.
type Result struct {
	// Error is set when the agent itself could not do the job (bad request,
	// renderer not startable, output unreadable); the renderer's own failure
	// is an ExitCode != 0 instead.
	Error string `json:"error,omitempty"`
	// ExitCode of the renderer, -1 when it was killed by a signal.
	ExitCode int `json:"exit_code"`
	// Signal that killed the renderer, 0 if none.
	Signal int `json:"signal,omitempty"`
	// OutputLimit is set when the outputs exceeded MaxOutputBytes or
	// MaxOutputFiles; no files were sent.
	OutputLimit bool `json:"output_limit,omitempty"`
	// StderrTail is the end of the renderer's combined stdout and stderr.
	StderrTail string `json:"stderr_tail,omitempty"`
	// MaxRSSKiB is the renderer's peak resident set, as the sandbox's kernel
	// reports it.
	MaxRSSKiB int64 `json:"max_rss_kib,omitempty"`
	// Primed is set when the job's first step ran in the program the
	// agent started before the request (WarmExec).
	Primed     bool         `json:"primed,omitempty"`
	DurationMS int64        `json:"duration_ms"`
	Files      []FileInfo   `json:"files,omitempty"`
	Probe      *ProbeReport `json:"probe,omitempty"`
	// Blocked lists the first requests the page made that were refused
	// (another origin or scheme); Missing the first to its own origin for
	// files the job does not have; ConsoleErrors the first errors it
	// logged or threw. Each is Diagnostics: the agent says no more, the
	// host keeps no more.
	Blocked       []string `json:"blocked,omitempty"`
	Missing       []string `json:"missing,omitempty"`
	ConsoleErrors []string `json:"console_errors,omitempty"`
}

// Bounds on each diagnostic list of a Result: its first MaxDiagnostics
// entries, each at most MaxDiagnosticBytes ("…" included when cut).
const (
	MaxDiagnostics     = 20
	MaxDiagnosticBytes = 200
)

// FileInfo lists an output file the agent sent, with its digest.
type FileInfo struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ProbeReport is what the probe saw from inside the sandbox.
type ProbeReport struct {
	UID, GID, EUID, EGID int
	Groups               []int
	// Capability sets as /proc/self/status prints them (hex).
	CapInh, CapPrm, CapEff, CapBnd, CapAmb string
	NoNewPrivs                             string
	Seccomp                                string
	Interfaces                             []string
	RootWriteError                         string // empty means writing under / succeeded
	TmpWriteError                          string // empty means /tmp is writable
	SysWriteError                          string // empty means /sys is writable
	TmpExecError                           string // empty means a binary copied to /tmp ran
	FuseError, FuseDetail                  string // FuseError empty: /dev/fuse opened as a device
	TmpSizeBytes                           uint64 // tmpfs size from statfs
	TmpFilled                              int64  // bytes written before the fill stopped
	TmpFillError                           string
	Mounts                                 []string
	Sysname, Release, Version              string
	KernelLog                              string // the first lines of syslog(2)
	Dials                                  []DialResult
	Hostname                               string
	Escapes                                []Attempt
	// Agent is the agent's own view: the probe above runs as a renderer.
	Agent *AgentView `json:",omitempty"`
}

// AgentView is who the agent runs as, reported beside a probe.
type AgentView struct {
	UID, GID               int
	CapInh, CapPrm, CapEff string
	CapBnd, CapAmb         string
}

// DialResult is one attempted TCP connection.
type DialResult struct {
	Addr  string `json:"addr"`
	Error string `json:"error,omitempty"` // empty means it connected
}
