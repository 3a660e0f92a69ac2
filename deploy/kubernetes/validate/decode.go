package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Object is one rendered document, decoded, with where it came from.
type Object struct {
	Source string // helm's "# Source:" line
	Obj    runtime.Object
}

// strict decodes YAML or JSON into the scheme's typed objects, refusing
// unknown and duplicated fields.
var strict = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// Decode reads a stream of YAML documents and decodes each strictly. A
// document of comments only (what helm renders for a disabled template)
// is skipped.
func Decode(r io.Reader) ([]Object, error) {
	yr := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var objs []Object
	var errs []error
	for i := 0; ; i++ {
		doc, err := yr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading document %d: %w", i, err)
		}
		src := source(doc)
		if empty(doc) {
			continue
		}
		obj, gvk, err := strict.Decode(doc, nil, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", src, err))
			continue
		}
		if gvk.Kind == "" {
			errs = append(errs, fmt.Errorf("%s: no kind", src))
			continue
		}
		objs = append(objs, Object{Source: src, Obj: obj})
	}
	if len(objs) == 0 && len(errs) == 0 {
		return nil, errors.New("no document to validate")
	}
	return objs, errors.Join(errs...)
}

func source(doc []byte) string {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if s, ok := bytes.CutPrefix(bytes.TrimSpace(line), []byte("# Source: ")); ok {
			return string(s)
		}
	}
	return "(no # Source line)"
}

// empty reports a document with nothing but comments and blank lines.
func empty(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if len(l) > 0 && l[0] != '#' && !bytes.Equal(l, []byte("---")) {
			return false
		}
	}
	return true
}
