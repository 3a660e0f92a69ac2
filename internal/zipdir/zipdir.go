// Package zipdir reads a ZIP archive's central directory the one way both
// sides of the sandbox accept it: the host judges a client's archive by it,
// and the sandbox's unpacker refuses to unpack one it would read otherwise.
//
// Readers differ on a directory that disagrees with its end record.
// archive/zip reads entries on past the directory's stated size and checks
// their count only modulo 65536; a reader that stops at the stated size sees
// fewer. An archive whose end record says one entry in 56 bytes, over a
// directory of 1,501, was one index.html to the host and 1,501 files in the
// sandbox. So a directory is read only when everything agrees: the end
// record ends the file, the ZIP64 record (if any) matches it, the directory
// ends where the records after it begin, its entries fill it exactly and
// there are as many as stated. Any reader then finds the same entries:
// archive/zip, starting at the stated offset, stops at the record that
// follows the last one.
//
// The package imports nothing of the project: the agent links it.
package zipdir

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Bounds on a central directory. The end record is read first and the
// directory only after its entry count and size pass these: archive/zip
// would parse a 48 MB directory of 900 k entries into 335 MB of File
// structs just to sniff a type.
const (
	MaxEntries        = 10_000
	MaxDirectoryBytes = 4 << 20
)

// The kinds of Refusal.
var (
	// ErrNotZip: no end record, or records that point outside the file.
	ErrNotZip = errors.New("not a readable zip")
	// ErrTooLarge: the directory is over MaxEntries or MaxDirectoryBytes.
	ErrTooLarge = errors.New("zip directory over the caps")
	// ErrDisagrees: the directory is not what its end record says.
	ErrDisagrees = errors.New("zip directory disagrees with its end record")
)

// Refusal is why an archive's directory was not read. Kind is ErrNotZip,
// ErrTooLarge or ErrDisagrees (errors.Is matches it); Reason says what was
// found, for the client.
type Refusal struct {
	Kind   error
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }
func (r *Refusal) Unwrap() error { return r.Kind }

func refuse(kind error, format string, args ...any) error {
	return &Refusal{Kind: kind, Reason: fmt.Sprintf(format, args...)}
}

const (
	endLen          = 22 // end of central directory record, without its comment
	zip64LocatorLen = 20
	zip64EndLen     = 56
	headerLen       = 46 // a directory entry, without its name, extra and comment
	maxCommentLen   = 0xffff
	sigEnd          = 0x06054b50
	sigZip64Locator = 0x07064b50
	sigZip64End     = 0x06064b50
	sigHeader       = 0x02014b50
	countMarker     = 0xffff     // this field lives in the ZIP64 record
	sizeMarker      = 0xffffffff // likewise
)

// Entry is what the central directory says of one entry.
type Entry struct {
	Name   []byte
	Flags  uint16 // bit 0: encrypted
	Method uint16 // 0 stored, 8 deflated
	// Size is the uncompressed size; 0xffffffff when it is in a ZIP64
	// extra field (an entry over 4 GiB, or one that says it is).
	Size uint32
	// UnixMode is the Unix mode in the external attributes when the
	// entry was made on Unix, else 0.
	UnixMode uint32
	// Offset is where the entry's local header starts; 0xffffffff when
	// it is in a ZIP64 extra field.
	Offset uint32
}

// Walk calls fn with each entry of b's central directory, in order, once
// the whole directory has been read and found to agree with its end
// records and to be within the caps; otherwise it returns a *Refusal and
// fn is never called. fn's error ends the walk. It allocates nothing per
// entry: fn gets the same Entry each time, its Name a slice of b.
func Walk(b []byte, fn func(e *Entry) error) error {
	dir, err := directory(b)
	if err != nil {
		return err
	}
	var e Entry
	for len(dir) > 0 {
		dir, _ = next(dir, &e)
		if err := fn(&e); err != nil {
			return err
		}
	}
	return nil
}

// directory returns b's central directory once it agrees with the end
// records: what Walk walks.
func directory(b []byte) ([]byte, error) {
	end, err := readEnd(b)
	if err != nil {
		return nil, err
	}
	if end.entries > MaxEntries {
		return nil, refuse(ErrTooLarge, "the ZIP's directory lists %d entries, more than the %d accepted", end.entries, MaxEntries)
	}
	if end.size > MaxDirectoryBytes {
		return nil, refuse(ErrTooLarge, "the ZIP's directory is %d bytes, more than the %d accepted", end.size, MaxDirectoryBytes)
	}
	// The directory ends where the records after it begin: no bytes
	// between, which a reader that reads on would take for entries, and
	// no data before the archive, which archive/zip would skip.
	if end.offset > end.at || end.at-end.offset != end.size {
		return nil, refuse(ErrDisagrees, "the ZIP's end record says its directory is %d bytes from offset %d, but the directory must end where the end records begin, at offset %d", end.size, end.offset, end.at)
	}
	dir := b[end.offset:end.at]
	var e Entry
	n := uint64(0)
	for rest := dir; len(rest) > 0; n++ {
		if n == MaxEntries {
			return nil, refuse(ErrTooLarge, "the ZIP's directory holds more than %d entries", MaxEntries)
		}
		var ok bool
		if rest, ok = next(rest, &e); !ok {
			return nil, refuse(ErrDisagrees, "the ZIP's directory holds %d entries and then %d bytes that are not one, within the %d bytes its end record says", n, len(rest), end.size)
		}
	}
	if n != end.entries {
		return nil, refuse(ErrDisagrees, "the ZIP's end record says %d entries, but its directory holds %d", end.entries, n)
	}
	return dir, nil
}

// next reads the entry at the start of dir into e and returns the rest;
// false if dir does not start with a whole entry.
func next(dir []byte, e *Entry) ([]byte, bool) {
	le := binary.LittleEndian
	if len(dir) < headerLen || le.Uint32(dir) != sigHeader {
		return dir, false
	}
	nameLen, extraLen, commentLen := int(le.Uint16(dir[28:])), int(le.Uint16(dir[30:])), int(le.Uint16(dir[32:]))
	n := headerLen + nameLen + extraLen + commentLen
	if n > len(dir) {
		return dir, false
	}
	*e = Entry{Name: dir[headerLen : headerLen+nameLen], Flags: le.Uint16(dir[8:]), Method: le.Uint16(dir[10:]),
		Size: le.Uint32(dir[24:]), Offset: le.Uint32(dir[42:])}
	if dir[5] == 3 { // made by: Unix
		e.UnixMode = le.Uint32(dir[38:]) >> 16
	}
	return dir[n:], true
}

// end is what a ZIP's end records say about its central directory, and
// where the first of them (the ZIP64 end record, if any) begins.
type end struct {
	entries, size, offset uint64
	at                    uint64
}

// readEnd reads the end-of-central-directory record, the last one in b,
// which with its comment must end b, and the ZIP64 end record when a
// ZIP64 locator precedes it. A field the end record holds in full must
// match the ZIP64 record's.
func readEnd(b []byte) (end, error) {
	le := binary.LittleEndian
	i := -1
	for j := len(b) - endLen; j >= max(0, len(b)-endLen-maxCommentLen); j-- {
		if le.Uint32(b[j:]) == sigEnd {
			i = j
			break
		}
	}
	if i < 0 {
		return end{}, refuse(ErrNotZip, "the ZIP has no end of central directory record")
	}
	rec := b[i : i+endLen]
	if comment, after := int(le.Uint16(rec[20:])), len(b)-i-endLen; comment != after {
		return end{}, refuse(ErrDisagrees, "the ZIP's end record says a %d-byte comment follows it, but %d bytes do", comment, after)
	}
	e := end{entries: uint64(le.Uint16(rec[10:])), size: uint64(le.Uint32(rec[12:])), offset: uint64(le.Uint32(rec[16:])), at: uint64(i)}
	loc := i - zip64LocatorLen
	if loc < 0 || le.Uint32(b[loc:]) != sigZip64Locator {
		return e, nil
	}
	// ZIP64: the locator points at the ZIP64 end record, which must end
	// where the locator begins.
	if le.Uint32(b[loc+4:]) != 0 || le.Uint32(b[loc+16:]) != 1 {
		return end{}, refuse(ErrNotZip, "the ZIP's ZIP64 locator names an archive of several disks")
	}
	off := le.Uint64(b[loc+8:])
	if off > uint64(loc) || uint64(loc)-off < zip64EndLen || le.Uint32(b[off:]) != sigZip64End {
		return end{}, refuse(ErrNotZip, "the ZIP's ZIP64 locator points at no ZIP64 end record")
	}
	r64 := b[off : off+zip64EndLen]
	if size := le.Uint64(r64[4:]); size != uint64(loc)-off-12 {
		return end{}, refuse(ErrDisagrees, "the ZIP's ZIP64 end record says it is %d bytes long, but the locator follows it after %d", size+12, uint64(loc)-off)
	}
	z := end{entries: le.Uint64(r64[32:]), size: le.Uint64(r64[40:]), offset: le.Uint64(r64[48:]), at: off}
	for _, f := range []struct {
		name        string
		short, full uint64
		marker      uint64
	}{{"entries", e.entries, z.entries, countMarker}, {"directory size", e.size, z.size, sizeMarker}, {"directory offset", e.offset, z.offset, sizeMarker}} {
		if f.short != f.marker && f.short != f.full {
			return end{}, refuse(ErrDisagrees, "the ZIP's end record says %s %d, its ZIP64 end record %d", f.name, f.short, f.full)
		}
	}
	return z, nil
}
