package ledger

import (
	"bytes"
	"fmt"
)

// MaxIdempotencyKey bounds an Idempotency-Key, which is stored with the job
// (docs/security.md, "Request intake bounds").
const MaxIdempotencyKey = 255

// CheckIdempotencyKey accepts "" (no key) or 1 to MaxIdempotencyKey
// printable ASCII characters; anything else wraps ErrInvalid.
func CheckIdempotencyKey(k string) error {
	if len(k) > MaxIdempotencyKey {
		return fmt.Errorf("the Idempotency-Key is %d characters, more than %d: %w", len(k), MaxIdempotencyKey, ErrInvalid)
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return fmt.Errorf("the Idempotency-Key has byte %#x at %d; use printable ASCII: %w", k[i], i, ErrInvalid)
		}
	}
	return nil
}

// Differs names the first thing, other than the idempotency key, in which
// a replayed request b differs from the job a it replays ("" when none):
// renderer, options, limits, input, callback_url, output_name, or
// "password or deliver" (their SecretsDigest, when both have one). Options
// and limits compare as the canonical JSON the API records.
func Differs(a, b Job) string {
	orEmpty := func(j []byte) []byte {
		if len(j) == 0 {
			return []byte("{}")
		}
		return j
	}
	switch {
	case a.Renderer != b.Renderer:
		return "renderer"
	case !bytes.Equal(orEmpty(a.Options), orEmpty(b.Options)):
		return "options"
	case !bytes.Equal(orEmpty(a.Limits), orEmpty(b.Limits)):
		return "limits"
	case a.InputSHA256 != b.InputSHA256 || a.InputSize != b.InputSize:
		return "input"
	case a.InputType != b.InputType && a.InputType != "" && b.InputType != "":
		// A job recorded before input types were is not a conflict.
		return "input_type"
	case a.CallbackURL != b.CallbackURL:
		return "callback_url"
	case a.OutputName != b.OutputName:
		return "output_name"
	case a.SecretsDigest != b.SecretsDigest && a.SecretsDigest != "" && b.SecretsDigest != "":
		// Only a digest: the record never holds a password or a
		// presigned URL.
		return "password or deliver"
	}
	return ""
}
