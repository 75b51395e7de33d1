package format

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// redacted replaces a secret wherever one would be printed.
const redacted = "[redacted]"

// Secret is a credential's secret: an API token, or "username:password"
// for vendors that take a username and password (Booking.com's B.XML in
// HTTP basic auth, Expedia AR in the body). It is one string because it
// comes from one place, a Secrets Manager SecretString or an environment
// variable (connections' secret_id / token_env).
//
// Every way of printing it gives "[redacted]": fmt with any verb, slog,
// encoding/json, encoding/xml and anything using encoding.TextMarshaler.
// Reveal and UserPassword are the only ways to the value.
type Secret struct{ value string }

// NewSecret wraps a secret read from the credential's store.
func NewSecret(value string) Secret { return Secret{value: value} }

// IsZero reports an empty secret.
func (s Secret) IsZero() bool { return s.value == "" }

// Reveal is the secret in clear, for the one place that sends it.
func (s Secret) Reveal() string { return s.value }

// ErrNotUserPassword is matched by UserPassword's error.
var ErrNotUserPassword = errors.New(`credential secret is not "username:password"`)

// UserPassword splits a "username:password" secret at its first colon: a
// username cannot hold one (as in HTTP basic auth, RFC 7617), a password
// may. The error never holds the secret.
func (s Secret) UserPassword() (user, password string, err error) {
	user, password, ok := strings.Cut(s.value, ":")
	if !ok || user == "" || password == "" {
		return "", "", fmt.Errorf("%w: store the secret as username:password (the username may not contain ':')", ErrNotUserPassword)
	}
	return user, password, nil
}

func (s Secret) String() string   { return redacted }
func (s Secret) GoString() string { return redacted }

// Format prints "[redacted]" for every verb, %d and %x included, which
// would otherwise print the struct's field.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue keeps the secret out of slog records.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON keeps the secret out of JSON (dead letters, job payloads).
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(redacted) }

// MarshalText keeps the secret out of XML and other text encodings.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// fragments are the forms the secret can take in a request: in clear, its
// password alone, basic auth's base64, and the XML and JSON escapes of
// each.
func (s Secret) fragments() []string {
	if s.value == "" {
		return nil
	}
	raw := []string{s.value, base64.StdEncoding.EncodeToString([]byte(s.value))}
	if _, pw, err := s.UserPassword(); err == nil {
		raw = append(raw, pw)
	}
	var out []string
	for _, r := range raw {
		var x bytes.Buffer
		_ = xml.EscapeText(&x, []byte(r))
		j, _ := json.Marshal(r)
		out = append(out, r, x.String(), string(j[1:len(j)-1]))
	}
	return out
}

// Redacted is r with its secret removed from the headers and the body: what
// a log line or a dead letter may hold. Authorization headers are replaced
// whatever they hold.
func (r Request) Redacted() Request {
	out := r
	out.Header = r.Header.Clone()
	for _, h := range []string{"Authorization", "Proxy-Authorization"} {
		if out.Header.Get(h) != "" {
			out.Header.Set(h, redacted)
		}
	}
	body := string(r.Body)
	for _, f := range r.Work.Secret.fragments() {
		body = strings.ReplaceAll(body, f, redacted)
	}
	out.Body = []byte(body)
	return out
}

// dump is the redacted request as JSON-friendly fields.
type dump struct {
	Method string      `json:"method"`
	Path   string      `json:"path,omitempty"`
	Header http.Header `json:"header,omitempty"`
	Body   string      `json:"body"`
	Hotel  string      `json:"hotel_ref"`
	Kind   string      `json:"kind"`
	Items  int         `json:"items"`
}

func (r Request) dump() dump {
	red := r.Redacted()
	return dump{Method: red.Method, Path: red.Path, Header: red.Header, Body: string(red.Body),
		Hotel: r.Work.HotelRef, Kind: r.Work.Kind, Items: r.Work.Items()}
}

// String is the redacted request.
func (r Request) String() string {
	d := r.dump()
	return fmt.Sprintf("%s %s %v\n%s", d.Method, d.Path, d.Header, d.Body)
}

// GoString is the redacted request.
func (r Request) GoString() string { return r.String() }

// Format prints the redacted request for every verb.
func (r Request) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(r.String())) }

// MarshalJSON is the redacted request, for a dead letter.
func (r Request) MarshalJSON() ([]byte, error) { return json.Marshal(r.dump()) }

// LogValue is the redacted request, its body cut to 2 KiB.
func (r Request) LogValue() slog.Value {
	d := r.dump()
	if len(d.Body) > 2048 {
		d.Body = d.Body[:2048] + "…"
	}
	return slog.GroupValue(slog.String("method", d.Method), slog.String("path", d.Path),
		slog.String("hotel_ref", d.Hotel), slog.String("kind", d.Kind), slog.Int("items", d.Items),
		slog.Any("header", d.Header), slog.String("body", d.Body))
}
