package credentials

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// SecretRefPrefix starts a reference to a Secrets Manager secret; it is the
// same as connections.SecretRefPrefix.
const SecretRefPrefix = "secretsmanager:"

// Defaults of a Cache.
const (
	// DefaultTTL is how long a token read from Secrets Manager is used
	// before it is read again.
	DefaultTTL = 5 * time.Minute
	// DefaultMaxStale is how long past its TTL a token is still handed out
	// while Secrets Manager cannot be reached. An invalidated token is
	// never handed out again.
	DefaultMaxStale = time.Hour
)

// ErrNotSet is matched by the error for a reference that yields no token: an
// unset environment variable, or a secret whose value is empty or binary.
var ErrNotSet = errors.New("credential token not set")

// SecretsManagerAPI is the part of *secretsmanager.Client a Cache uses.
type SecretsManagerAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// Cache reads tokens and keeps those from Secrets Manager for a TTL. Its
// methods are safe for concurrent use; concurrent first reads of one
// secret make a single GetSecretValue call. The zero value is not usable:
// call New.
type Cache struct {
	sm       SecretsManagerAPI
	ttl      time.Duration
	maxStale time.Duration
	getenv   func(string) string
	now      func() time.Time

	mu      sync.Mutex
	entries map[string]*entry
}

// entry is one secret's cached token, or the read in progress.
type entry struct {
	token   string
	fetched time.Time
	// loading is closed when the read in progress ends; nil if none.
	loading chan struct{}
	err     error // the read's error, for those who waited on it
}

// Option configures a Cache.
type Option func(*Cache)

// WithTTL sets how long a token read from Secrets Manager is used (default
// DefaultTTL; ≤ 0 reads it on every call).
func WithTTL(d time.Duration) Option { return func(c *Cache) { c.ttl = d } }

// WithMaxStale sets how long past its TTL a token is still used while
// Secrets Manager fails (default DefaultMaxStale; 0 never).
func WithMaxStale(d time.Duration) Option { return func(c *Cache) { c.maxStale = d } }

// WithGetenv sets where token_env references are read (default os.Getenv).
func WithGetenv(f func(string) string) Option { return func(c *Cache) { c.getenv = f } }

// WithClock sets the clock (tests).
func WithClock(now func() time.Time) Option { return func(c *Cache) { c.now = now } }

// New returns a cache reading secrets with sm, which may be nil if every
// reference is an environment variable.
func New(sm SecretsManagerAPI, opts ...Option) *Cache {
	c := &Cache{sm: sm, ttl: DefaultTTL, maxStale: DefaultMaxStale, getenv: os.Getenv, now: time.Now, entries: map[string]*entry{}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// IsSecret reports whether ref names a Secrets Manager secret, and which.
func IsSecret(ref string) (secretID string, ok bool) {
	return strings.CutPrefix(ref, SecretRefPrefix)
}

// Token returns the token ref names. For a secret it answers from memory
// while the cached copy is younger than the TTL, and reads Secrets Manager
// otherwise; if that read fails, a copy less than MaxStale past its TTL is
// returned instead (and the next call tries again). Errors name the
// reference, never a token.
func (c *Cache) Token(ctx context.Context, ref string) (string, error) {
	id, ok := IsSecret(ref)
	if !ok {
		if tok := c.getenv(ref); tok != "" {
			return tok, nil
		}
		return "", fmt.Errorf("%w: environment variable %q is empty", ErrNotSet, ref)
	}
	for {
		c.mu.Lock()
		e := c.entries[ref]
		switch {
		case e != nil && e.loading != nil:
			wait := e.loading
			c.mu.Unlock()
			select {
			case <-wait:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			if e.err != nil {
				// The read we waited on failed: share its error rather
				// than each waiter trying again at once.
				return "", e.err
			}
			continue // answer from what the read left
		case e != nil && c.now().Sub(e.fetched) < c.ttl:
			tok := e.token
			c.mu.Unlock()
			return tok, nil
		}
		if e == nil {
			e = &entry{}
			c.entries[ref] = e
		}
		e.loading, e.err = make(chan struct{}), nil
		c.mu.Unlock()
		return c.load(ctx, ref, id, e)
	}
}

// load reads the secret into e, which the caller marked loading.
func (c *Cache) load(ctx context.Context, ref, id string, e *entry) (string, error) {
	tok, err := c.read(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(e.loading)
	e.loading = nil
	current := c.entries[ref] == e
	switch {
	case err == nil && current:
		e.token, e.fetched = tok, c.now()
		return tok, nil
	case err == nil:
		// Invalidated while the read was in flight: it may have returned
		// the old value, so it serves this call and its waiters only.
		e.token, e.fetched = tok, c.now()
		return tok, nil
	case current && e.token != "" && c.maxStale > 0 && c.now().Sub(e.fetched) < c.ttl+c.maxStale:
		return e.token, nil // Secrets Manager failed; the copy is recent enough
	}
	e.err = err
	if current {
		delete(c.entries, ref)
	}
	return "", err
}

// read calls Secrets Manager once.
func (c *Cache) read(ctx context.Context, id string) (string, error) {
	if c.sm == nil {
		return "", fmt.Errorf("secret %q: no Secrets Manager client configured", id)
	}
	out, err := c.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &id})
	if err != nil {
		return "", fmt.Errorf("secret %q: %w", id, err)
	}
	if out.SecretString == nil {
		return "", fmt.Errorf("%w: secret %q has no SecretString (a binary secret?); store the token as its text", ErrNotSet, id)
	}
	tok := strings.TrimSpace(*out.SecretString)
	if tok == "" {
		return "", fmt.Errorf("%w: secret %q is empty", ErrNotSet, id)
	}
	return tok, nil
}

// Invalidate forgets the cached token of ref, so that the next Token reads
// it again: call it when the OTA refuses the token (401/403), which is how
// a rotation shows. A read in flight is not used beyond its own caller.
// References to environment variables have nothing to forget.
func (c *Cache) Invalidate(ref string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, ref)
}

// Lookup is Token in the shape of syncer.Syncer.Credential (func(ref)
// (string, error)): each call gets its own timeout, and an error is also
// handed to onErr (which may be nil), for a log line. The syncer treats an
// error as a store failure: the job is deferred and comes back, holding
// what it carries, until the token can be read; it is never dead-lettered.
func (c *Cache) Lookup(timeout time.Duration, onErr func(ref string, err error)) func(ref string) (string, error) {
	return func(ref string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		tok, err := c.Token(ctx, ref)
		if err != nil && onErr != nil {
			onErr(ref, err)
		}
		return tok, err
	}
}
