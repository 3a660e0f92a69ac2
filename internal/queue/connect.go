package queue

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// DefaultRedis is where Redis is when nothing says otherwise: the local one
// that `make run` starts, without a password.
const DefaultRedis = "127.0.0.1:6379"

// RedisConfig says how the API and the worker reach Redis; both read it the
// same way (Bind, then Options). A password never comes from a flag, whose
// value every user on the host sees in ps: it comes from the environment
// or from a file.
type RedisConfig struct {
	// Addr is -redis (env RENDERBOX_REDIS): host:port,
	// redis://[user@]host[:port][/db] or rediss://… (TLS). A password in
	// it is refused. Default 127.0.0.1:6379 when URL is empty too.
	Addr string
	// URL is RENDERBOX_REDIS_URL: the same forms as Addr, a password
	// allowed (redis://user:password@host:port/db). Only one of Addr and
	// URL may be given.
	URL string
	// Password is RENDERBOX_REDIS_PASSWORD.
	Password string
	// PasswordFile is -redis-password-file (env
	// RENDERBOX_REDIS_PASSWORD_FILE): a file holding the password, read
	// once at start, its trailing newline dropped.
	PasswordFile string
	// CAFile is -redis-ca-file (env RENDERBOX_REDIS_CA_FILE): PEM
	// certificates that verify a rediss:// server (a private CA) in place
	// of the system's roots.
	CAFile string
	// ServerName is -redis-server-name (env RENDERBOX_REDIS_SERVER_NAME):
	// the name a rediss:// server's certificate must carry. Default the
	// address's host.
	ServerName string
}

// Bind registers the Redis flags on fs — their variables
// (RENDERBOX_REDIS, …) are read with every other flag's by the binaries'
// envflag.Apply — and reads the variables that have no flag, which hold a
// password and so never go on a command line.
func (c *RedisConfig) Bind(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "redis", "", "Redis: host:port, redis://[user@]host:port[/db] or rediss://… (no password here: see -redis-password-file; default "+DefaultRedis+")")
	fs.StringVar(&c.PasswordFile, "redis-password-file", "", "file holding the Redis password (or set RENDERBOX_REDIS_PASSWORD, or the whole URL in RENDERBOX_REDIS_URL)")
	fs.StringVar(&c.CAFile, "redis-ca-file", "", "PEM CA certificates that verify a rediss:// server (default: the system's)")
	fs.StringVar(&c.ServerName, "redis-server-name", "", "name a rediss:// server's certificate must carry (default: the address's host)")
	c.URL = os.Getenv("RENDERBOX_REDIS_URL")
	c.Password = os.Getenv("RENDERBOX_REDIS_PASSWORD")
}

// Options parses the configuration into go-redis options, reading the
// password file and the CA file, and returns with them the address as it
// may be logged (never with a password).
func (c RedisConfig) Options() (*redis.Options, string, error) {
	raw, mayHoldPassword := c.Addr, false
	switch {
	case c.Addr != "" && c.URL != "":
		return nil, "", errors.New("redis: both -redis (or RENDERBOX_REDIS) and RENDERBOX_REDIS_URL are set; give one")
	case c.URL != "":
		raw, mayHoldPassword = c.URL, true
	case c.Addr == "":
		raw = DefaultRedis
	}
	o, shown, err := parseRedis(raw)
	if err != nil {
		return nil, "", err
	}
	// The password's sources, of which at most one may be used.
	var from []string
	if o.Password != "" {
		if !mayHoldPassword {
			return nil, "", errors.New("redis: -redis holds a password, which every user on the host sees in ps; " +
				"pass it in RENDERBOX_REDIS_PASSWORD or in a file named by -redis-password-file (RENDERBOX_REDIS_PASSWORD_FILE), or the whole URL in RENDERBOX_REDIS_URL")
		}
		from = append(from, "RENDERBOX_REDIS_URL")
	}
	if c.Password != "" {
		o.Password = c.Password
		from = append(from, "RENDERBOX_REDIS_PASSWORD")
	}
	if c.PasswordFile != "" {
		b, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return nil, "", fmt.Errorf("redis: reading -redis-password-file: %w", err)
		}
		p := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if p == "" {
			return nil, "", fmt.Errorf("redis: -redis-password-file %s is empty (write the password into it)", c.PasswordFile)
		}
		o.Password = p
		from = append(from, "-redis-password-file")
	}
	if len(from) > 1 {
		return nil, "", fmt.Errorf("redis: the password is given more than once (%s); give it once", strings.Join(from, " and "))
	}
	if o.TLSConfig == nil {
		if c.CAFile != "" || c.ServerName != "" {
			return nil, "", fmt.Errorf("redis: -redis-ca-file and -redis-server-name need a rediss:// address (TLS), not %s", shown)
		}
		return o, shown, nil
	}
	if c.ServerName != "" {
		o.TLSConfig.ServerName = c.ServerName
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, "", fmt.Errorf("redis: reading -redis-ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, "", fmt.Errorf("redis: -redis-ca-file %s holds no PEM certificate", c.CAFile)
		}
		o.TLSConfig.RootCAs = pool
	}
	return o, shown, nil
}

// parseRedis reads host:port, redis://… or rediss://… into options and
// the address as it may be shown (the password left out).
func parseRedis(raw string) (*redis.Options, string, error) {
	const forms = "host:port, redis://[user@]host:port[/db] or rediss://[user@]host:port[/db]"
	if !strings.Contains(raw, "://") {
		host, port, err := net.SplitHostPort(raw)
		if err != nil || host == "" || !validPort(port) {
			return nil, "", fmt.Errorf("redis: address %q is not one of %s", raw, forms)
		}
		return &redis.Options{Addr: raw}, raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url's error quotes the whole URL, password included.
		return nil, "", fmt.Errorf("redis: the address is not a URL (%s; percent-encode a password's special characters, e.g. %%23 for #, %%40 for @)", forms)
	}
	// Errors name the scheme and host only: a password with an unencoded
	// '/', '?' or '#' spills into the path, query or fragment.
	bad := func(why string) (*redis.Options, string, error) {
		return nil, "", fmt.Errorf("redis: address %s://%s: %s", u.Scheme, u.Host, why)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return bad(fmt.Sprintf("scheme %q is neither redis nor rediss (%s)", u.Scheme, forms))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return bad("options after ? or # are not read; use the -redis-* flags")
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		return bad("no host")
	}
	if port == "" {
		port = "6379"
	} else if !validPort(port) {
		return bad(fmt.Sprintf("port %q is not a number from 1 to 65535", port))
	}
	o := &redis.Options{Addr: net.JoinHostPort(host, port), Username: u.User.Username()}
	o.Password, _ = u.User.Password()
	if p := strings.TrimPrefix(u.Path, "/"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return bad("the path is not a database number (redis://host:port/0, /1, …; percent-encode a password's special characters)")
		}
		o.DB = n
	}
	if u.Scheme == "rediss" {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	}
	// The shown form drops the password altogether rather than mask it.
	u.User = nil
	if o.Username != "" {
		u.User = url.User(o.Username)
	}
	return o, u.String(), nil
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// ErrRedisConfig marks a Redis that answers but refuses this client: a
// wrong or missing password, or a certificate that does not verify. Unlike
// a Redis that is down, waiting does not help; the configuration must
// change.
var ErrRedisConfig = errors.New("redis refuses this configuration")

// CheckRedis pings Redis at shown and says what to fix when it does not
// answer. Errors that waiting cannot fix wrap ErrRedisConfig.
func CheckRedis(ctx context.Context, rdb redis.UniversalClient, shown string) error {
	err := rdb.Ping(ctx).Err()
	if err == nil {
		return nil
	}
	msg := err.Error()
	var certErr *tls.CertificateVerificationError
	var hostErr x509.HostnameError
	switch {
	case strings.HasPrefix(msg, "WRONGPASS"):
		return fmt.Errorf("%w: redis at %s refused the user and password (%v); check RENDERBOX_REDIS_PASSWORD, -redis-password-file or RENDERBOX_REDIS_URL", ErrRedisConfig, shown, err)
	case strings.HasPrefix(msg, "NOAUTH"):
		return fmt.Errorf("%w: redis at %s wants a password (%v); give it in RENDERBOX_REDIS_PASSWORD, a file named by -redis-password-file, or RENDERBOX_REDIS_URL", ErrRedisConfig, shown, err)
	case errors.As(err, &certErr), errors.As(err, &hostErr):
		return fmt.Errorf("%w: redis at %s: its certificate does not verify (%v); check -redis-ca-file and -redis-server-name", ErrRedisConfig, shown, err)
	}
	return fmt.Errorf("redis at %s: %w", shown, err)
}
