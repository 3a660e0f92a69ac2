package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"regexp"
)

// A pooled sandbox may be one of many restored from one checkpoint image:
// each starts with the memory the image saved, and with it every random
// state a process seeded before the checkpoint. What reaches a document
// or an output is drawn after the restore, from getrandom, which the
// Sentry serves from the host's (docs/security.md, "What restored
// sandboxes share").

// freshMathRandom replaces Math.random in every document before its
// scripts run. V8 seeds each new context's Math.random from its isolate's
// generator, seeded once when the browser booted: in sandboxes restored
// from one image every page drew the same numbers. This one draws from
// crypto.getRandomValues (getrandom), 512 draws of 53 bits a call, and is
// made as a method so that, like the built-in, it has no prototype and is
// not a constructor. Workers are isolates of their own, made (and seeded
// from getrandom) after the restore: their Math.random is V8's.
const freshMathRandom = `(() => {
  const fill = Crypto.prototype.getRandomValues.bind(crypto);
  const words = new Uint32Array(1024);
  let next = words.length;
  const {random} = {random() {
    if (next === words.length) { fill(words); next = 0; }
    const hi = words[next++] >>> 5, lo = words[next++] >>> 6;
    return (hi * 67108864 + lo) / 9007199254740992;
  }};
  Object.defineProperty(Math, "random", {value: random, writable: true, enumerable: false, configurable: true});
})();`

// createTemp is os.CreateTemp with a name from getrandom: os.CreateTemp
// draws from the Go runtime's generator, seeded when the agent started,
// before any checkpoint.
func createTemp(dir, prefix string) (*os.File, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(dir, prefix+hex.EncodeToString(b[:])), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// trailerID is a PDF trailer's /ID pair, as LibreOffice writes it.
var trailerID = regexp.MustCompile(`/ID\s*\[\s*<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*\]`)

// freshPDFID gives the PDF at path an /ID from getrandom. LibreOffice's is
// an MD5 of the clock and the document's info, not of anything random.
// The new one has the same length and both of the pair are equal when they
// were (a new document's), so nothing else of the file moves. The file is
// the renderer's, which the agent may not write: the agent copies it and
// renames its copy over it. It reports whether it found an /ID to replace
// in the trailer, the last one of the file; a PDF without one carries no
// id to repeat and is left as it is.
func freshPDFID(path string) (bool, error) {
	src, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return false, err
	}
	n := min(st.Size(), 4096)
	end := make([]byte, n)
	if _, err := src.ReadAt(end, st.Size()-n); err != nil {
		return false, err
	}
	t := bytes.LastIndex(end, []byte("trailer"))
	if t < 0 {
		return false, nil
	}
	trailer := end[t:]
	m := trailerID.FindSubmatchIndex(trailer)
	if m == nil {
		return false, nil
	}
	first, second := trailer[m[2]:m[3]], trailer[m[4]:m[5]]
	same := bytes.EqualFold(first, second)
	if err := randomHex(first); err != nil {
		return false, err
	}
	if same {
		copy(second, first)
	} else if err := randomHex(second); err != nil {
		return false, err
	}
	dst, err := createTemp(filepath.Dir(path), ".pdf-")
	if err != nil {
		return false, err
	}
	_, err = io.Copy(dst, io.NewSectionReader(src, 0, st.Size()-n+int64(t)))
	if err == nil {
		_, err = dst.Write(trailer)
	}
	if err == nil {
		err = dst.Chmod(st.Mode().Perm())
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(dst.Name(), path)
	}
	if err != nil {
		os.Remove(dst.Name())
		return false, err
	}
	return true, nil
}

// randomHex overwrites the hex digits of b with ones from getrandom, in
// b's case.
func randomHex(b []byte) error {
	upper := bytes.ContainsAny(b, "ABCDEF")
	r := make([]byte, (len(b)+1)/2)
	if _, err := rand.Read(r); err != nil {
		return err
	}
	h := hex.EncodeToString(r)[:len(b)]
	if upper {
		h = string(bytes.ToUpper([]byte(h)))
	}
	copy(b, h)
	return nil
}
