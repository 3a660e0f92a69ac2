package render

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/renderbox/renderbox/internal/zipdir"
)

// zipEntries walks input's central directory as the sandbox's unpacker
// will read it (zipdir.Walk), its refusals in the catalogue's words: over
// the caps is ErrInputTooLarge, a directory that disagrees with its end
// record ErrInvalidInput; one that cannot be read stays a
// zipdir.ErrNotZip refusal for the caller to judge. fn's error ends the
// walk as it is.
func zipEntries(input []byte, fn func(e *zipdir.Entry) error) error {
	err := zipdir.Walk(input, fn)
	var ref *zipdir.Refusal
	if !errors.As(err, &ref) {
		return err
	}
	switch ref.Kind {
	case zipdir.ErrTooLarge:
		return fmt.Errorf("%w: %s", ErrInputTooLarge, ref.Reason)
	case zipdir.ErrDisagrees:
		return fmt.Errorf("%w: %s; such an archive reads differently in different readers (rewrite it with a standard zip tool)", ErrInvalidInput, ref.Reason)
	}
	return err
}

// zipNames calls fn with the name of each entry zipEntries walks.
func zipNames(input []byte, fn func(name []byte)) error {
	return zipEntries(input, func(e *zipdir.Entry) error { fn(e.Name); return nil })
}

// ooxmlParts are the entries that tell OOXML documents apart.
var ooxmlParts = []struct{ name, typ string }{
	{"word/document.xml", TypeDOCX}, {"xl/workbook.xml", TypeXLSX}, {"ppt/presentation.xml", TypePPTX},
}

// sniffZipDirectory tells OOXML documents from other ZIP files by the names
// in the central directory. A directory over the caps or one that
// disagrees with its end record is an error; one it cannot read is plain
// application/zip.
func sniffZipDirectory(input []byte) (string, error) {
	contentTypes := false
	has := make([]bool, len(ooxmlParts))
	err := zipNames(input, func(name []byte) {
		contentTypes = contentTypes || bytes.Equal(name, []byte("[Content_Types].xml"))
		for i, p := range ooxmlParts {
			has[i] = has[i] || bytes.Equal(name, []byte(p.name))
		}
	})
	if errors.Is(err, ErrInputTooLarge) || errors.Is(err, ErrInvalidInput) {
		return TypeZIP, err
	}
	if err != nil || !contentTypes {
		return TypeZIP, nil
	}
	for i, p := range ooxmlParts {
		if has[i] {
			return p.typ, nil
		}
	}
	return TypeZIP, nil
}
