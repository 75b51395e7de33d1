package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/test/emulator"
)

// result is one run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs commands in-process with captured output. env holds the
// flag defaults (FLEETBUCKET_*); the process environment is not read.
type cli struct {
	t   *testing.T
	env map[string]string
	aws *aws.Config // nil: commands that need AWS fail the test
}

// newCLI is a CLI on the local stack (skipped without one, failed under
// FLEETBUCKET_INTEGRATION=1).
func newCLI(t *testing.T, env map[string]string) *cli {
	cfg := emulator.Config(t)
	return &cli{t: t, env: env, aws: &cfg}
}

func (c *cli) run(args ...string) result {
	c.t.Helper()
	var stdout, stderr bytes.Buffer
	app := &App{
		Stdout: &stdout, Stderr: &stderr,
		Getenv: func(k string) string { return c.env[k] },
		AWSConfig: func(context.Context) (aws.Config, error) {
			if c.aws == nil {
				c.t.Fatalf("%v needed AWS", args)
			}
			return *c.aws, nil
		},
		DynamoDBOptions: []func(*dynamodb.Options){emulator.ForEmulator},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := app.Main(ctx, args)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// must fails the test unless r succeeded, and returns its stdout.
func (r result) must(t *testing.T) string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// fails fails the test unless r failed with stderr holding want.
func (r result) fails(t *testing.T, want string) {
	t.Helper()
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d, want 1 with stderr holding %q\nstdout:\n%s\nstderr:\n%s", r.code, want, r.stdout, r.stderr)
	}
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not the JSON wanted: %v\n%s", err, s)
	}
	return v
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodConfig = `{
  "channels": {
    "bk": {
      "base_url": "https://x.example/api",
      "endpoints": {
        "availability": {"path": "/a", "limit": {"rate": 10, "burst": 20}},
        "rates": {"path": "/r", "limit": {"rate": 10, "burst": 10},
          "limits": [{"per_minute": 300, "burst": 6}], "property_share": {"rate": 1, "burst": 2}},
        "restrictions": {"path": "/s", "limit": {"rate": 40, "burst": 8}, "shards": 4}
      },
      "credentials": {"c1": {"token_env": "T"}}
    }
  },
  "properties": {"h1": [{"channel": "bk", "credential": "c1", "hotel_ref": "R1"}]}
}`

func TestConfigValidate(t *testing.T) {
	c := &cli{t: t}
	bad := strings.NewReplacer(`"rate": 10, "burst": 20`, `"rate": -1, "burst": 20`,
		`"channel": "bk"`, `"channel": "ex"`, `"path": "/r"`, `"path": "/../r"`).Replace(goodConfig)
	tests := []struct {
		name, file string
		json       bool
		code       int
		want       []string // in stdout
	}{
		{"valid", goodConfig, false, 0, []string{"valid (1 channels, 3 endpoints, 1 credentials, 1 properties)"}},
		{"every problem with its path", bad, false, 1, []string{
			"3 problem(s)",
			"  channels.bk.endpoints.availability.limit: ",
			"  channels.bk.endpoints.rates.path: ",
			`  properties.h1[0].channel: unknown channel "ex"`,
		}},
		{"json", bad, true, 1, []string{`"valid":false`, `"path":"properties.h1[0].channel","message":"unknown channel \"ex\""`}},
		{"duplicate key", strings.Replace(goodConfig, `"rate": 40,`, `"rate": 40, "rate": 400,`, 1), false, 1, []string{
			`channels.bk.endpoints.restrictions.limit.rate: key "rate" appears twice`}},
		{"trailing garbage", goodConfig + "x", false, 1, []string{"data after the JSON value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.t = t
			args := []string{"config", "validate", writeFile(t, "connections.json", tt.file)}
			if tt.json {
				args = append(args, "--json")
			}
			r := c.run(args...)
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", r.code, tt.code, r.stdout, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			if tt.code != 0 && !strings.Contains(r.stderr, "fix each at its path") {
				t.Errorf("stderr does not say what to do: %s", r.stderr)
			}
		})
	}
	c.t = t
	c.run("config", "validate", filepath.Join(t.TempDir(), "nope.json")).fails(t, "no such file")
}

// Arguments refused before any AWS call: the command says what to pass.
func TestRefusedBeforeAWS(t *testing.T) {
	cfg := writeFile(t, "c.json", goodConfig)
	c := &cli{t: t, env: map[string]string{}}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"state", "bk", "c1", "availability"}, "pass --config connections.json or set FLEETBUCKET_CONNECTIONS"},
		{[]string{"state", "bk", "c1", "availability", "--config", cfg, "x"}, "accepts 3 arg(s)"},
		{[]string{"state", "zz", "c1", "availability", "--config", cfg}, `unknown channel "zz" (channels and endpoints: bk (availability, rates, restrictions))`},
		{[]string{"state", "bk", "c2", "availability", "--config", cfg}, `channel "bk" has no credential "c2" (it has: c1)`},
		{[]string{"state", "bk", "c1", "availability", "--config", cfg, "--property", "h1"}, "no property_share"},
		{[]string{"penalize", "bk", "c1", "availability", "--config", cfg}, "--for: give how long"},
		{[]string{"penalize", "bk", "c1", "availability", "--config", cfg, "--for", "25h"}, "at most 24h0m0s (limiter.MaxPenalty)"},
		{[]string{"watch", "bk", "c1", "availability", "--config", cfg, "--interval", "1ms"}, "--interval: want at least 10ms"},
		{[]string{"dlq", "list"}, "pass --dlq-url or set FLEETBUCKET_DLQ_URL"},
		{[]string{"dlq", "redrive", "--dlq-url", "http://q"}, "pass --changes-queue-url and/or --deferred-queue-url"},
		{[]string{"cell", "show", "h1", "rates", "std"}, "--month: which month"},
		{[]string{"cell", "show", "h1", "nightly", "std", "--month", "2027-01"}, `kind "nightly": want one of availability, rates, restrictions`},
		{[]string{"cell", "show", "h1", "rates", "std", "--month", "2027-01"}, "pass --state-table or set FLEETBUCKET_STATE_TABLE"},
		{[]string{"cell", "reset-sequence", "h1", "rates", "std", "--state-table", "s"}, "--date: which day"},
		{[]string{"cell", "reset-sequence", "h#1", "rates", "std", "--date", "2027-01-05"}, "contains '#'"},
		{[]string{"cell", "reset-sequence", "h1", "rates", "std", "--date", "2027-01-05", "--to", "-1"}, "--to -1: want 0.."},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c.t = t
			c.run(tt.args...).fails(t, tt.want)
		})
	}
}

// grants counts every emission interval tat moved on from max(tat, now).
func TestGrantsFromTAT(t *testing.T) {
	t0 := time.Unix(1_000, 0)
	b := []limiter.Bucket{{Key: "k", Limit: limiter.PerSecond(10, 20)}} // T = 100ms
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name      string
		prev, cur reading
		want      float64
	}{
		{"no item, nothing granted", reading{at: at(0), tats: []time.Time{{}}}, reading{at: at(1000), tats: []time.Time{{}}}, 0},
		{"full bucket, nothing granted", reading{at: at(0), tats: []time.Time{at(-500)}}, reading{at: at(1000), tats: []time.Time{at(-500)}}, 0},
		{"busy bucket: exact", reading{at: at(0), tats: []time.Time{at(800)}}, reading{at: at(1000), tats: []time.Time{at(2300)}}, 15},
		{"first grants on a full bucket at the reading", reading{at: at(0), tats: []time.Time{at(-500)}}, reading{at: at(1000), tats: []time.Time{at(300)}}, 3},
		{"reset in between", reading{at: at(0), tats: []time.Time{at(2000)}}, reading{at: at(1000), tats: []time.Time{{}}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := grants(tt.prev, tt.cur, b); got != tt.want {
				t.Fatalf("grants = %v, want %v", got, tt.want)
			}
		})
	}
}
