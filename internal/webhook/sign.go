package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SecretPrefix starts every webhook secret, as Standard Webhooks does.
const SecretPrefix = "whsec_"

// masterBytes is the size of the operator's master secret.
const masterBytes = 32

// LoadOrCreateMaster reads the master secret at path, creating it (0600,
// random) when it does not exist. Every API key's webhook secret is derived
// from it, so the file must be the same on every API host and must not be
// lost: a new master changes every tenant's secret.
func LoadOrCreateMaster(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		b = make([]byte, masterBytes)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("webhook master secret: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("webhook master secret: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return LoadOrCreateMaster(path) // another process made it first
		}
		if err != nil {
			return nil, fmt.Errorf("webhook master secret: %w", err)
		}
		_, werr := f.Write(b)
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("webhook master secret %s: %w", path, err)
		}
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("webhook master secret: %w", err)
	}
	// A key file someone made readable by others is narrowed: every
	// tenant's signing secret derives from it.
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("webhook master secret %s is readable by others and could not be narrowed to 0600: %w", path, err)
		}
	}
	if len(b) < masterBytes {
		return nil, fmt.Errorf("webhook master secret %s holds %d bytes, want at least %d (delete it to have a new one made, which changes every key's webhook secret)", path, len(b), masterBytes)
	}
	return b, nil
}

// DeriveSecret returns the webhook secret of API key keyID: an HMAC of the
// key id under the master secret, so nothing per key is stored and one
// tenant's secret says nothing about another's.
func DeriveSecret(master []byte, keyID string) string {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("renderbox webhook secret v1\x00" + keyID))
	return SecretPrefix + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func secretKey(secret string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(b) == 0 {
		return nil, errors.New("webhook secret is not whsec_ followed by base64")
	}
	return b, nil
}

// Sign returns the webhook-signature header value for a message:
// "v1," and the base64 HMAC-SHA256 of "id.timestamp.body".
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, strconv.FormatInt(ts.Unix(), 10), body)), nil
}

func mac(key []byte, id, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	return m.Sum(nil)
}

// Tolerance is how far a message's timestamp may be from the receiver's
// clock before Verify refuses it (replay protection).
const Tolerance = 5 * time.Minute

// Verify checks a received message the way a receiver should: the
// timestamp within Tolerance of now, and one of the space-separated v1
// signatures matching. Receivers in Go can use it as it is.
func Verify(secret, id, timestamp, signatures string, body []byte, now time.Time) error {
	key, err := secretKey(secret)
	if err != nil {
		return err
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not unix seconds", timestamp)
	}
	if d := math.Abs(float64(now.Unix() - ts)); d > Tolerance.Seconds() {
		return fmt.Errorf("webhook-timestamp is %.0fs from now, over the %v tolerance", d, Tolerance)
	}
	want := mac(key, id, timestamp, body)
	for _, s := range strings.Fields(signatures) {
		v, sig, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no webhook-signature matches")
}
