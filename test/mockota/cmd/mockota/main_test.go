package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/sdk/gcra"
)

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string // "" for success
	}{
		{"defaults", nil, ""},
		{"full", []string{"-rate", "20", "-burst", "40", "-hidden-rate", "5", "-hidden-burst", "10",
			"-credentials", "a, b", "-addr-file", "/tmp/x", "-latency", "5ms", "-port", "8080", "-retry-after-date"}, ""},
		{"zero rate", []string{"-rate", "0"}, "-rate 0"},
		{"negative rate", []string{"-rate", "-1"}, "-rate -1"},
		{"zero burst", []string{"-burst", "0"}, "-burst 0"},
		{"hidden rate only", []string{"-hidden-rate", "5"}, "-hidden-rate 5 -hidden-burst 0"},
		{"hidden burst only", []string{"-hidden-burst", "5"}, "-hidden-rate 0 -hidden-burst 5"},
		{"empty credential", []string{"-credentials", "a,,b"}, "empty entry"},
		{"bad port", []string{"-port", "70000"}, "-port 70000"},
		{"negative latency", []string{"-latency", "-1s"}, "-latency"},
		{"positional", []string{"extra"}, "unexpected arguments"},
		{"unknown flag", []string{"-nope"}, "-nope"},
		{"not a number", []string{"-rate", "fast"}, "-rate"},
		{"window enforcement", []string{"-enforce", "window"}, ""},
		{"unknown enforcement", []string{"-enforce", "strict"}, "-enforce"},
		{"hidden limit needs gcra", []string{"-enforce", "window", "-hidden-rate", "5", "-hidden-burst", "10"}, "need -enforce gcra"},
		{"opentravel", []string{"-format", "opentravel", "-mapped-rooms", "DBL, SGL"}, ""},
		{"expedia-ar", []string{"-format", "expedia-ar"}, ""},
		{"unknown format", []string{"-format", "edifact"}, `-format "edifact"`},
		{"mapped rooms need an XML format", []string{"-mapped-rooms", "DBL"}, "-mapped-rooms needs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			o, err := parseFlags(tc.args, &stderr)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("parseFlags: %v (%s)", err, stderr.String())
				}
				return
			}
			if err == nil {
				t.Fatalf("parseFlags accepted %q: %+v", tc.args, o)
			}
			if out := stderr.String(); !strings.Contains(out, tc.wantErr) || !strings.Contains(out, "usage: mockota") {
				t.Fatalf("stderr %q, want %q and the usage", out, tc.wantErr)
			}
			if code := run(context.Background(), tc.args, &bytes.Buffer{}); code != 2 {
				t.Fatalf("exit code %d, want 2", code)
			}
		})
	}

	t.Run("format", func(t *testing.T) {
		o, err := parseFlags([]string{"-format", "opentravel", "-mapped-rooms", "DBL, SGL"}, &bytes.Buffer{})
		if err != nil || o.cfg.Wire == nil || o.cfg.Wire.Format != "opentravel" || strings.Join(o.cfg.Wire.MappedRooms, "|") != "DBL|SGL" {
			t.Fatalf("parseFlags = %+v, %v", o.cfg.Wire, err)
		}
		if o, _ := parseFlags(nil, &bytes.Buffer{}); o.cfg.Wire != nil {
			t.Fatalf("json by default, got %+v", o.cfg.Wire)
		}
	})

	t.Run("values", func(t *testing.T) {
		o, err := parseFlags([]string{"-rate", "20", "-burst", "40", "-hidden-rate", "5", "-hidden-burst", "10", "-credentials", "a, b"}, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if o.cfg.Limit != (gcra.Limit{Rate: 20, Burst: 40}) || o.cfg.HiddenLimit == nil || *o.cfg.HiddenLimit != (gcra.Limit{Rate: 5, Burst: 10}) {
			t.Fatalf("limits %+v hidden %v", o.cfg.Limit, o.cfg.HiddenLimit)
		}
		if got := strings.Join(o.cfg.Credentials, "|"); got != "a|b" {
			t.Fatalf("credentials %q", got)
		}
	})
	t.Run("help", func(t *testing.T) {
		_, err := parseFlags([]string{"-h"}, &bytes.Buffer{})
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("err %v, want flag.ErrHelp", err)
		}
	})
}

// The command publishes its URL, serves, and on shutdown logs the counts
// and removes the address file.
func TestServe(t *testing.T) {
	addr := filepath.Join(t.TempDir(), "ota.url")
	o, err := parseFlags([]string{"-rate", "1", "-burst", "1", "-credentials", "a", "-addr-file", addr}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := start(o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(addr)
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSpace(string(b))
	if url != s.URL() || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("addr file %q, server at %q", url, s.URL())
	}
	for i, want := range []int{200, 429} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/rates", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer a")
		req.Header.Set("X-Job-Id", "j")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, want)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var logs bytes.Buffer
	serve(ctx, s, o, newLogger(&logs))
	if out := logs.String(); !strings.Contains(out, "1 accepted, 1 answered 429, 2 requests in all") ||
		!strings.Contains(out, "no window of accepted requests over burst + rate·W") {
		t.Fatalf("summary %q", out)
	}
	if _, err := os.Stat(addr); !os.IsNotExist(err) {
		t.Fatalf("addr file still there after shutdown: %v", err)
	}
	client := http.Client{Timeout: 5 * time.Second}
	if resp, err := client.Post(url+"/v1/rates", "application/json", strings.NewReader(`{}`)); err == nil {
		resp.Body.Close()
		t.Fatal("server still answering after shutdown")
	}
}
