package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/renderbox/renderbox/internal/render"
)

// fuzzBody is the body bound the intake fuzz targets read under.
const fuzzBody = 1 << 20

func fuzzRead(t *testing.T, contentType string, body []byte) (*submission, *render.Renderer, error) {
	r, _ := http.NewRequest("POST", "/v1/jobs", bytes.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	sub, rd, err := readSubmission(r, fuzzBody, render.Lookup)
	if err != nil {
		return nil, nil, err
	}
	if rd == nil || rd.Name != sub.Renderer || int64(len(sub.Input)) > rd.MaxInputBytes {
		t.Fatalf("accepted renderer %v with %d input bytes", rd, len(sub.Input))
	}
	if len(sub.Options) > maxFieldBytes || len(sub.Limits) > maxFieldBytes || len(sub.CallbackURL) > maxFieldBytes {
		t.Fatalf("accepted fields over %d bytes", maxFieldBytes)
	}
	if err := render.CheckOutputName(sub.OutputName); err != nil {
		t.Fatalf("accepted output_name %q: %v", sub.OutputName, err)
	}
	return sub, rd, nil
}

// The streaming JSON reader accepts nothing encoding/json would not, and
// reads what it accepts the same way.
func FuzzJSONIntake(f *testing.F) {
	for _, s := range []string{
		`{"renderer":"dot-svg","input_base64":"ZGlncmFwaCB7IGEgLT4gYiB9"}`,
		`{"input_base64":"ZGln\/cmFw\naA==","renderer":"d\u006ft-svg","options":{"layout":"neato"},"limits":{"timeout_seconds":5},"callback_url":"https://h.example/\u00e9","output_name":"r\u0065port-1.v2"}`,
		`{"renderer":"dot-svg","input_base64":"","output_name":"../x"}`,
		` { "renderer" : "pdf-png" , "input_base64" : "" , "options" : null } `,
		`{"renderer":"svg-png","input_base64":"PHN2Zy8+","options":[1,{"a":"}"}],"limits":"x"}`,
		`{"renderer":"svg-png","input_base64":"PHN2Zy8+","renderer":"x"}`,
		`{"renderer":"svg-png","input_base64":"PHN2Zy8+"} x`,
		`{"renderer":"\ud83d\ude00","input_base64":"\u0041\u0041=="}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sub, _, err := fuzzRead(t, "application/json", body)
		if err != nil {
			return
		}
		var js struct {
			Renderer    string          `json:"renderer"`
			InputBase64 string          `json:"input_base64"`
			Options     json.RawMessage `json:"options"`
			Limits      json.RawMessage `json:"limits"`
			CallbackURL string          `json:"callback_url"`
			OutputName  string          `json:"output_name"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&js); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", body, err)
		}
		input, err := base64.StdEncoding.DecodeString(js.InputBase64)
		if err != nil || !bytes.Equal(input, sub.Input) {
			t.Fatalf("input %q, encoding/json and base64 read %q (%v)", sub.Input, input, err)
		}
		if js.Renderer != sub.Renderer || js.CallbackURL != sub.CallbackURL || js.OutputName != sub.OutputName {
			t.Fatalf("renderer %q callback %q output_name %q, encoding/json read %q %q %q", sub.Renderer, sub.CallbackURL, sub.OutputName, js.Renderer, js.CallbackURL, js.OutputName)
		}
		for _, p := range [][2][]byte{{sub.Options, js.Options}, {sub.Limits, js.Limits}} {
			var a, b bytes.Buffer
			_ = json.Compact(&a, p[0])
			_ = json.Compact(&b, p[1])
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Fatalf("field %q, encoding/json read %q", p[0], p[1])
			}
		}
	})
}

func FuzzMultipartIntake(f *testing.F) {
	part := func(name, v string) string {
		return "--b\r\nContent-Disposition: form-data; name=\"" + name + "\"\r\n\r\n" + v + "\r\n"
	}
	file := "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\ndigraph { a -> b }\r\n"
	for _, s := range []string{
		part("renderer", "dot-svg") + file + "--b--\r\n",
		file + part("renderer", "dot-svg") + part("options", `{"layout":"dot"}`) + part("limits", `{}`) + "--b--\r\n",
		part("renderer", "dot-svg") + part("renderer", "dot-png") + file + "--b--\r\n",
		part("callback_url", "https://h.example/") + file + "--b--",
		part("output_name", "report") + part("renderer", "dot-svg") + file + part("output_name", "x") + "--b--\r\n",
		"--b\r\nContent-Disposition: form-data; name=\"file\"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\na=3Db\r\n--b--\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, _, _ = fuzzRead(t, "multipart/form-data; boundary=b", body)
	})
}
