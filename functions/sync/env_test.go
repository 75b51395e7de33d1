package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestInitRefusesBadSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":5,"burst":5}}},"credentials":{"c1":{"token_env":"BK_TOKEN"}}}}}`)
	sharded := write("sharded.json", `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":50,"burst":50},"shards":4}},"credentials":{"c1":{"token_env":"BK_TOKEN"}}}}}`)
	bad := write("bad.json", `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":0,"burst":5}}},"credentials":{"c1":{"token_env":"BK_TOKEN"}}}}}`)
	base := map[string]string{
		"FLEETBUCKET_TABLE": "limits", "FLEETBUCKET_STATE_TABLE": "state",
		"FLEETBUCKET_DEFERRED_QUEUE_URL": "http://q/deferred", "FLEETBUCKET_DLQ_URL": "http://q/dlq",
		"FLEETBUCKET_MAX_RECEIVE_COUNT": "5", "AWS_REGION": "us-east-1", "BK_TOKEN": "secret-token",
	}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range base {
			m[a] = b
		}
		m[k] = v
		return m
	}
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"missing table", with("FLEETBUCKET_TABLE", ""), "missing environment: FLEETBUCKET_TABLE"},
		{"missing config file", with("FLEETBUCKET_CONNECTIONS", filepath.Join(dir, "nope.json")), "nope.json: no such file"},
		{"invalid limit", with("FLEETBUCKET_CONNECTIONS", bad), "channels.bk.endpoints.rates.limit: invalid limit.rate: 0"},
		{"token not set", with("BK_TOKEN", ""), "credential tokens not set: BK_TOKEN (channel bk, credential c1)"},
		{"no maxReceiveCount", with("FLEETBUCKET_MAX_RECEIVE_COUNT", ""), "missing environment: FLEETBUCKET_MAX_RECEIVE_COUNT"},
		{"maxReceiveCount 1", with("FLEETBUCKET_MAX_RECEIVE_COUNT", "1"), `FLEETBUCKET_MAX_RECEIVE_COUNT is "1", want the deferred queue's maxReceiveCount, at least 2`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env["FLEETBUCKET_CONNECTIONS"] == "" {
				tt.env["FLEETBUCKET_CONNECTIONS"] = good
			}
			_, err := newHandler(context.Background(), env(tt.env), slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("newHandler = %v, want an error containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "secret-token") {
				t.Fatalf("the error leaks a token: %v", err)
			}
		})
	}
	ok := with("FLEETBUCKET_CONNECTIONS", good)
	h, err := newHandler(context.Background(), env(ok), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("a good config was refused: %v", err)
	}
	if got, err := h.syncer.Credential("BK_TOKEN"); got != "secret-token" || err != nil {
		t.Fatalf("the token hook reads %q, %v from BK_TOKEN", got, err)
	}
	// Sharded endpoints are routed through ReserveSharded.
	if _, err := newHandler(context.Background(), env(with("FLEETBUCKET_CONNECTIONS", sharded)), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatalf("a sharded config was refused: %v", err)
	}
}

// A credential read from Secrets Manager needs nothing in the environment:
// the function starts without reading it (first use does), and the syncer
// is handed its secret reference.
func TestInitWithSecretCredential(t *testing.T) {
	p := filepath.Join(t.TempDir(), "secret.json")
	cfg := `{"channels":{"bk":{"base_url":"https://x.example","endpoints":{"rates":{"path":"/r","limit":{"rate":5,"burst":5}}},` +
		`"credentials":{"c1":{"secret_id":"fleetbucket/bk-c1"},"c2":{"token_env":"BK_TOKEN"}}}}}`
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := newHandler(context.Background(), env(map[string]string{
		"FLEETBUCKET_TABLE": "limits", "FLEETBUCKET_STATE_TABLE": "state",
		"FLEETBUCKET_DEFERRED_QUEUE_URL": "http://q/deferred", "FLEETBUCKET_DLQ_URL": "http://q/dlq",
		"FLEETBUCKET_MAX_RECEIVE_COUNT": "5", "AWS_REGION": "us-east-1", "FLEETBUCKET_CONNECTIONS": p, "BK_TOKEN": "env-token",
	}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("newHandler = %v, want it to start with no token in the environment", err)
	}
	creds := h.syncer.Config.Channels["bk"].Credentials
	if got := creds["c1"].Ref(); got != "secretsmanager:fleetbucket/bk-c1" {
		t.Fatalf("the syncer sees c1 as %q, want its secret reference", got)
	}
	if got := creds["c2"].Ref(); got != "BK_TOKEN" {
		t.Fatalf("the syncer sees c2 as %q, want BK_TOKEN", got)
	}
	if h.tokens == nil {
		t.Fatal("no token cache for the push path to invalidate")
	}
}
