package ledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// An API key secret is rbx_<id hex>_<body>: the id lets Authenticate find
// the row without scanning, the body is 32 random bytes, base64url without
// padding. Only sha256(secret) is stored, so a leaked database does not leak
// usable keys.
const (
	secretPrefix  = "rbx_"
	keyIDPrefix   = "key_"
	keyIDBytes    = 8
	keyIDHexLen   = 2 * keyIDBytes
	secretBytes   = 32
	secretBodyLen = 43 // base64.RawURLEncoding.EncodedLen(secretBytes)
	secretLen     = len(secretPrefix) + keyIDHexLen + 1 + secretBodyLen
)

// CreateKey makes a new API key. The returned secret is the only copy.
func (s *sqlStore) CreateKey(ctx context.Context, name string) (string, Key, error) {
	return s.createKey(ctx, name, false)
}

// CreateAdminKey makes a new admin API key (Key.Admin).
func (s *sqlStore) CreateAdminKey(ctx context.Context, name string) (string, Key, error) {
	return s.createKey(ctx, name, true)
}

func (s *sqlStore) createKey(ctx context.Context, name string, admin bool) (string, Key, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", Key{}, fmt.Errorf("create api key: empty name (name the key after who will hold it): %w", ErrInvalid)
	}
	if !storableText(name) {
		return "", Key{}, fmt.Errorf("create api key: the name holds NUL or invalid UTF-8 (use UTF-8 text): %w", ErrInvalid)
	}
	idHex, err := randomHex(keyIDBytes)
	if err != nil {
		return "", Key{}, fmt.Errorf("create api key: %w", err)
	}
	body := make([]byte, secretBytes)
	if _, err := rand.Read(body); err != nil {
		return "", Key{}, fmt.Errorf("create api key: read random bytes: %w", err)
	}
	secret := secretPrefix + idHex + "_" + base64.RawURLEncoding.EncodeToString(body)
	k := Key{ID: keyIDPrefix + idHex, Name: name, CreatedAt: now(), Admin: admin}

	err = s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			"INSERT INTO api_keys (id, name, secret_sha256, created_at, admin) VALUES ($1, $2, $3, $4, $5)",
			k.ID, k.Name, hashSecret(secret), toNanos(k.CreatedAt), admin)
		return err
	})
	if err != nil {
		return "", Key{}, fmt.Errorf("create api key %q: %w", name, err)
	}
	return secret, k, nil
}

// Authenticate returns the live key secret belongs to. Every failure wraps
// ErrUnauthorized with the same message, so a caller learns nothing about
// which part was wrong.
func (s *sqlStore) Authenticate(ctx context.Context, secret string) (Key, error) {
	unauthorized := fmt.Errorf("authenticate: %w", ErrUnauthorized)

	idHex, ok := parseSecret(secret)
	if !ok {
		return Key{}, unauthorized
	}
	var (
		k       Key
		stored  string
		created int64
		revoked sql.NullInt64
	)
	st, err := s.stmts.get(ctx, s.r, "SELECT id, name, secret_sha256, created_at, revoked_at, admin FROM api_keys WHERE id = $1")
	if err == nil {
		err = st.QueryRowContext(ctx, keyIDPrefix+idHex).Scan(&k.ID, &k.Name, &stored, &created, &revoked, &k.Admin)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// Compare anyway so an unknown id costs what a wrong secret does.
		stored = strings.Repeat("0", sha256.Size*2)
	case err != nil:
		// A database failure is not the client's fault: say so.
		return Key{}, fmt.Errorf("authenticate: look up key: %w", err)
	}
	match := subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(stored)) == 1
	if err != nil || !match || revoked.Valid {
		return Key{}, unauthorized
	}
	k.CreatedAt = fromNanos(created)
	return k, nil
}

// RevokeKey revokes key id. Revoking a revoked key keeps its first
// revocation time and is not an error.
func (s *sqlStore) RevokeKey(ctx context.Context, id string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx,
			"UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
			toNanos(now()), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var exists bool
		if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM api_keys WHERE id = $1)", id).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("revoke api key %q: %w", id, err)
	}
	return nil
}

// ListKeys returns every key, oldest first. Hashes never leave the store.
func (s *sqlStore) ListKeys(ctx context.Context) ([]Key, error) {
	rows, err := s.r.QueryContext(ctx,
		"SELECT id, name, created_at, revoked_at, admin FROM api_keys ORDER BY created_at, id")
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	var keys []Key
	for rows.Next() {
		var (
			k       Key
			created int64
			revoked sql.NullInt64
		)
		if err := rows.Scan(&k.ID, &k.Name, &created, &revoked, &k.Admin); err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		k.CreatedAt, k.RevokedAt = fromNanos(created), fromNullNanos(revoked)
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return keys, nil
}

// parseSecret checks the shape of secret and returns its key id's hex part.
func parseSecret(secret string) (idHex string, ok bool) {
	if len(secret) != secretLen || !strings.HasPrefix(secret, secretPrefix) {
		return "", false
	}
	rest := secret[len(secretPrefix):]
	idHex, body := rest[:keyIDHexLen], rest[keyIDHexLen:]
	if !isLowerHex(idHex) || body[0] != '_' {
		return "", false
	}
	if b, err := base64.RawURLEncoding.Strict().DecodeString(body[1:]); err != nil || len(b) != secretBytes {
		return "", false
	}
	return idHex, true
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	return hex.EncodeToString(b), nil
}
