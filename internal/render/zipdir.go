package render

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// Bounds on a ZIP container's central directory. The end-of-central-
// directory record is read first and the directory only after its entry
// count and size pass these: archive/zip would parse a 48 MB directory of
// 900 k entries into 335 MB of File structs just to sniff a type.
const (
	MaxZipEntries        = 10_000
	MaxZipDirectoryBytes = 4 << 20
)

// errNotZip: the bytes are not a ZIP this code can read; the sniffer calls
// such input plain application/zip.
var errNotZip = errors.New("not a readable zip")

const (
	zipEndLen        = 22 // end of central directory record, without its comment
	zip64LocatorLen  = 20
	zip64EndLen      = 56
	zipDirHeaderLen  = 46
	zipMaxCommentLen = 0xffff
	sigZipEnd        = 0x06054b50
	sigZip64Locator  = 0x07064b50
	sigZip64End      = 0x06064b50
	sigZipDirectory  = 0x02014b50
	zipCountMarker   = 0xffff     // this field lives in the ZIP64 record
	zipSizeMarker    = 0xffffffff // likewise
)

// zipEnd is what a ZIP's end records say about its central directory.
type zipEnd struct {
	entries, size, offset uint64
}

// readZipEnd finds the end-of-central-directory record in the last 64 KiB
// of b (and the ZIP64 record it points to, when a field overflows) and
// returns the directory's entry count, size and offset as stated.
func readZipEnd(b []byte) (zipEnd, error) {
	le := binary.LittleEndian
	lo := max(0, len(b)-zipEndLen-zipMaxCommentLen)
	i := -1
	for j := len(b) - zipEndLen; j >= lo; j-- {
		if le.Uint32(b[j:]) == sigZipEnd {
			i = j
			break
		}
	}
	if i < 0 {
		return zipEnd{}, errNotZip
	}
	rec := b[i : i+zipEndLen]
	e := zipEnd{entries: uint64(le.Uint16(rec[10:])), size: uint64(le.Uint32(rec[12:])), offset: uint64(le.Uint32(rec[16:]))}
	if e.entries != zipCountMarker && e.size != zipSizeMarker && e.offset != zipSizeMarker {
		return e, nil
	}
	// ZIP64: a locator sits right before the end record and points at
	// the ZIP64 end record with 64-bit fields.
	if i < zip64LocatorLen || le.Uint32(b[i-zip64LocatorLen:]) != sigZip64Locator {
		return e, nil // a plain ZIP whose field happens to be all ones
	}
	off := le.Uint64(b[i-zip64LocatorLen+8:])
	if off > uint64(len(b)) || uint64(len(b))-off < zip64EndLen || le.Uint32(b[off:]) != sigZip64End {
		return zipEnd{}, errNotZip
	}
	rec = b[off : off+zip64EndLen]
	return zipEnd{entries: le.Uint64(rec[32:]), size: le.Uint64(rec[40:]), offset: le.Uint64(rec[48:])}, nil
}

// zipNames calls fn with the name of each central directory entry of b, in
// order, after checking the end record's count and size against the caps,
// and stops with an ErrInputTooLarge error if the walk finds more entries
// than the cap (the stated count may lie). It allocates nothing per entry.
func zipNames(b []byte, fn func(name []byte)) error {
	return zipEntries(b, func(e *zipEntry) error { fn(e.name); return nil })
}

// zipEntry is what the central directory says of one entry.
type zipEntry struct {
	name   []byte
	flags  uint16 // bit 0: encrypted
	method uint16 // 0 stored, 8 deflated
	// size is the uncompressed size; 0xffffffff when it is in a ZIP64
	// extra field (an entry over 4 GiB, or one that says it is).
	size uint32
	// unixMode is the Unix mode in the external attributes when the
	// entry was made on Unix, else 0.
	unixMode uint32
	// offset is where the entry's local header starts; 0xffffffff when
	// it is in a ZIP64 extra field.
	offset uint32
}

// zipEntries is zipNames with more of each entry; fn's error ends the walk.
func zipEntries(b []byte, fn func(e *zipEntry) error) error {
	end, err := readZipEnd(b)
	if err != nil {
		return err
	}
	if end.entries > MaxZipEntries {
		return fmt.Errorf("%w: the ZIP's directory lists %d entries, more than the %d accepted", ErrInputTooLarge, end.entries, MaxZipEntries)
	}
	if end.size > MaxZipDirectoryBytes {
		return fmt.Errorf("%w: the ZIP's directory is %d bytes, more than the %d accepted", ErrInputTooLarge, end.size, MaxZipDirectoryBytes)
	}
	if end.offset > uint64(len(b)) || uint64(len(b))-end.offset < end.size {
		return errNotZip
	}
	le := binary.LittleEndian
	dir := b[end.offset : end.offset+end.size]
	var e zipEntry
	for n := 0; len(dir) >= zipDirHeaderLen && le.Uint32(dir) == sigZipDirectory; n++ {
		if n == MaxZipEntries {
			return fmt.Errorf("%w: the ZIP's directory holds more than %d entries", ErrInputTooLarge, MaxZipEntries)
		}
		nameLen, extraLen, commentLen := int(le.Uint16(dir[28:])), int(le.Uint16(dir[30:])), int(le.Uint16(dir[32:]))
		next := zipDirHeaderLen + nameLen + extraLen + commentLen
		if next > len(dir) {
			return errNotZip
		}
		// One entry reused: fn gets a pointer, which would otherwise
		// cost an allocation per entry.
		e = zipEntry{name: dir[zipDirHeaderLen : zipDirHeaderLen+nameLen], flags: le.Uint16(dir[8:]),
			method: le.Uint16(dir[10:]), size: le.Uint32(dir[24:]), offset: le.Uint32(dir[42:])}
		if dir[5] == 3 { // made by: Unix
			e.unixMode = le.Uint32(dir[38:]) >> 16
		}
		if err := fn(&e); err != nil {
			return err
		}
		dir = dir[next:]
	}
	return nil
}

// ooxmlParts are the entries that tell OOXML documents apart.
var ooxmlParts = []struct{ name, typ string }{
	{"word/document.xml", TypeDOCX}, {"xl/workbook.xml", TypeXLSX}, {"ppt/presentation.xml", TypePPTX},
}

// sniffZipDirectory tells OOXML documents from other ZIP files by the names
// in the central directory. Only an over-cap directory is an error; one it
// cannot read is plain application/zip.
func sniffZipDirectory(input []byte) (string, error) {
	contentTypes := false
	has := make([]bool, len(ooxmlParts))
	err := zipNames(input, func(name []byte) {
		contentTypes = contentTypes || bytes.Equal(name, []byte("[Content_Types].xml"))
		for i, p := range ooxmlParts {
			has[i] = has[i] || bytes.Equal(name, []byte(p.name))
		}
	})
	if errors.Is(err, ErrInputTooLarge) {
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
