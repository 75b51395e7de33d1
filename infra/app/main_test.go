package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetbucket/fleetbucket/infra/stack"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

// These tests never start jsii: prepareAsset runs before any construct.

func root(t *testing.T) string {
	t.Helper()
	r, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// noAssetDirs fails if prepareAsset left an asset directory behind in dir.
func noAssetDirs(t *testing.T, dir string) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(dir, assetDirPrefix+"*"))
	if len(left) > 0 {
		t.Errorf("asset directories left behind: %v", left)
	}
}

func TestMissingConfigIsRefused(t *testing.T) {
	tmp := t.TempDir()
	missing := filepath.Join(tmp, "nope", "connections.json")
	a, err := prepareAsset(assetOptions{Root: root(t), ConfigPath: missing, Package: functionPackage, TempDir: tmp})
	if err == nil {
		a.Cleanup()
		t.Fatal("prepareAsset accepted a missing config file")
	}
	for _, want := range []string{missing, "does not exist", "-c config="} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	noAssetDirs(t, tmp)

	// A relative path is taken from the repository root, as cdk.json's is.
	_, err = prepareAsset(assetOptions{Root: root(t), ConfigPath: "config/does-not-exist.json", Package: functionPackage, TempDir: tmp})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root(t), "config", "does-not-exist.json")) {
		t.Errorf("relative config path: error %v, want one naming the path under the repo root", err)
	}
}

func TestInvalidInputsAreRefused(t *testing.T) {
	tmp := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.json", `{"channels": `)
	good := filepath.Join(root(t), defaultConfig)
	if _, err := os.Stat(good); err != nil {
		t.Fatalf("the example config %s is part of the repository and missing: %v", defaultConfig, err)
	}
	for _, tc := range []struct {
		name string
		o    assetOptions
		want string
	}{
		{"invalid JSON", assetOptions{ConfigPath: bad, Package: functionPackage}, "is invalid"},
		{"config is a directory", assetOptions{ConfigPath: tmp, Package: functionPackage}, "not a regular file"},
		{"maxConcurrency not a number", assetOptions{ConfigPath: good, Package: functionPackage, MaxConcurrency: "ten"}, "not an integer"},
		{"maxConcurrency 1", assetOptions{ConfigPath: good, Package: functionPackage, MaxConcurrency: "1"}, "outside [2, 1000]"},
		{"maxConcurrency 1001", assetOptions{ConfigPath: good, Package: functionPackage, MaxConcurrency: "1001"}, "outside [2, 1000]"},
		{"no function package", assetOptions{ConfigPath: good, Package: "./functions/does-not-exist"}, "not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Root, tc.o.TempDir = root(t), tmp
			a, err := prepareAsset(tc.o)
			if err == nil {
				a.Cleanup()
				t.Fatalf("prepareAsset accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			noAssetDirs(t, tmp)
		})
	}
}

// TestBuildsTheFunction builds the real ./functions/sync the way synth
// does: a linux/arm64 executable named bootstrap beside connections.json.
func TestBuildsTheFunction(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the linux/arm64 build of the function")
	}
	r := root(t)
	if _, err := os.Stat(filepath.Join(r, functionPackage)); err != nil {
		if os.Getenv("FLEETBUCKET_INTEGRATION") == "1" {
			t.Fatalf("%s is missing: %v", functionPackage, err)
		}
		t.Skipf("%s does not exist yet", functionPackage)
	}
	if _, err := os.Stat(filepath.Join(r, defaultConfig)); err != nil {
		t.Fatalf("the example config %s is part of the repository and missing: %v", defaultConfig, err)
	}
	tmp := t.TempDir()
	a, err := prepareAsset(assetOptions{Root: r, Package: functionPackage, TempDir: tmp, MaxConcurrency: "3"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Cleanup()
	if a.MaxConcurrency != 3 {
		t.Errorf("MaxConcurrency = %d, want the override 3", a.MaxConcurrency)
	}

	entries, err := os.ReadDir(a.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != stack.BootstrapFile+","+stack.ConnectionsFile {
		t.Errorf("asset directory holds %v, want exactly [%s %s]", names, stack.BootstrapFile, stack.ConnectionsFile)
	}

	bin := filepath.Join(a.Dir, stack.BootstrapFile)
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("bootstrap mode %v, want 0755 (Lambda runs it as another user)", fi.Mode().Perm())
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatalf("bootstrap is not an ELF binary: %v", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_AARCH64 || f.Type != elf.ET_EXEC {
		t.Errorf("bootstrap is %v %v, want an arm64 executable", f.Machine, f.Type)
	}
	if interp := f.Section(".interp"); interp != nil {
		t.Errorf("bootstrap is dynamically linked (CGO_ENABLED=0 expected)")
	}

	got, err := os.ReadFile(filepath.Join(a.Dir, stack.ConnectionsFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, a.Config) {
		t.Errorf("connections.json is not the config as deployed")
	}
	if bytes.Contains(got, []byte("token_env")) {
		t.Errorf("the deployed connections.json still names a token_env:\n%s", got)
	}

	a.Cleanup()
	noAssetDirs(t, tmp)
}

func TestResolveConfig(t *testing.T) {
	tmp := t.TempDir()
	cfgPath := filepath.Join(tmp, "connections.json")
	// 2 credentials x (10 + 5) req/s = 30 req/s: 30 x 0.2 s = 6 instances.
	cfgJSON := `{
	  "channels": {
	    "ota": {
	      "base_url": "https://ota.example/api",
	      "endpoints": {
	        "availability": {"path": "/a", "limit": {"rate": 10, "burst": 10}},
	        "rates":        {"path": "/r", "limit": {"rate": 5,  "burst": 5}}
	      },
	      "credentials": {"c1": {"token_env": "OTA_C1"}, "c2": {"token_env": "OTA_C2"}}
	    }
	  },
	  "properties": {"hotel": [{"channel": "ota", "credential": "c1", "hotel_ref": "H1"}]}
	}`
	if err := os.WriteFile(cfgPath, []byte(cfgJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatalf("the test's config is invalid for sdk/pipeline/config: %v", err)
	}
	a, err := resolveConfig(assetOptions{Root: root(t), ConfigPath: cfgPath, SecretPrefix: "p/"})
	if err != nil {
		t.Fatal(err)
	}
	if want := cfg.MaxConcurrency(); a.MaxConcurrency != want || !strings.Contains(a.MaxConcurrencySource, "computed") {
		t.Errorf("maxConcurrency = %d (%s), want %d computed from the config", a.MaxConcurrency, a.MaxConcurrencySource, want)
	}
	if got := strings.Join(a.TokenSecretIDs, ","); got != "p/OTA_C1,p/OTA_C2" {
		t.Errorf("TokenSecretIDs = %s, want p/OTA_C1,p/OTA_C2 (token_env deployed as prefix + name)", got)
	}
	deployed, err := config.Parse(a.Config)
	if err != nil {
		t.Fatalf("the deployed config is invalid: %v", err)
	}
	for id, cred := range deployed.Channels["ota"].Credentials {
		if cred.TokenEnv != "" || cred.SecretID != "p/OTA_"+strings.ToUpper(id) {
			t.Errorf("deployed credential %s = %+v, want secret_id p/OTA_%s and no token_env", id, cred, strings.ToUpper(id))
		}
	}
	a, err = resolveConfig(assetOptions{Root: root(t), ConfigPath: cfgPath, MaxConcurrency: " 42 "})
	if err != nil {
		t.Fatal(err)
	}
	if a.MaxConcurrency != 42 || !strings.Contains(a.MaxConcurrencySource, "context") {
		t.Errorf("maxConcurrency = %d (%s), want 42 from the context", a.MaxConcurrency, a.MaxConcurrencySource)
	}
}

func TestQuotas(t *testing.T) {
	cfg, err := config.Parse([]byte(`{
	  "channels": {
	    "ota": {
	      "base_url": "https://ota.example/api",
	      "endpoints": {
	        "availability": {"path": "/a", "meter": "ari", "limit": {"rate": 10, "burst": 20}},
	        "restrictions": {"path": "/s", "meter": "ari", "limit": {"rate": 10, "burst": 20}},
	        "rates":        {"path": "/r", "limit": {"rate": 5,  "burst": 5}}
	      },
	      "credentials": {"c2": {"token_env": "OTA_C2"}, "c1": {"token_env": "OTA_C1"}}
	    }
	  },
	  "properties": {"hotel": [{"channel": "ota", "credential": "c1", "hotel_ref": "H1"}]}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, q := range quotas(cfg) {
		got = append(got, fmt.Sprintf("%s %v/%d", q.Bucket(), q.Rate, q.Burst))
	}
	// Two endpoints on the meter "ari": one bucket, keyed as the workers
	// key it.
	want := "ota#c1#ari 10/20,ota#c1#rates 5/5,ota#c2#ari 10/20,ota#c2#rates 5/5"
	if strings.Join(got, ",") != want {
		t.Errorf("quotas = %v, want every credential × meter, sorted: %s", got, want)
	}
}

func TestAlarmSettings(t *testing.T) {
	lookup := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok && v != "" }
	}
	a, reserved, err := alarmSettings(lookup(nil))
	if err != nil || a != (stack.Alarms{}) || reserved != 0 {
		t.Errorf("no context: %+v, %d, %v; want zero values (the stack's defaults)", a, reserved, err)
	}
	a, reserved, err = alarmSettings(lookup(map[string]string{
		contextTopicArn: "arn:aws:sns:eu-west-1:1:pager", contextEmail: "ops@example.com", contextQueueAge: "120",
		contextThrottle: "2.5", contextMinReqs: "50", contextStoreErrs: "5", contextReserved: "40",
	}))
	want := stack.Alarms{TopicArn: "arn:aws:sns:eu-west-1:1:pager", Email: "ops@example.com", MaxQueueAge: 120 * time.Second,
		MaxThrottlePercent: 2.5, ThrottleAlarmMinRequests: 50, StoreErrorMinutes: 5}
	if err != nil || a != want || reserved != 40 {
		t.Errorf("alarmSettings = %+v, %d, %v; want %+v, 40", a, reserved, err, want)
	}
	if _, reserved, err = alarmSettings(lookup(map[string]string{contextReserved: "none"})); err != nil || reserved != stack.NoReservedConcurrency {
		t.Errorf("reservedConcurrency=none: %d, %v; want NoReservedConcurrency", reserved, err)
	}
	for key, bad := range map[string]string{
		contextQueueAge: "5m", contextThrottle: "0", contextMinReqs: "-1", contextStoreErrs: "x", contextReserved: "lots",
	} {
		if _, _, err := alarmSettings(lookup(map[string]string{key: bad})); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s=%q: error %v, want one naming the key", key, bad, err)
		}
	}
}

func TestCapacitySetting(t *testing.T) {
	lookup := func(v string) func(string) (string, bool) {
		return func(k string) (string, bool) { return v, k == contextStateRU && v != "" }
	}
	tests := []struct {
		value string
		want  *stack.Capacity
		err   string
	}{
		{"", nil, ""},
		{"read=5..100,write=100..4000", &stack.Capacity{Read: stack.Range{Min: 5, Max: 100}, Write: stack.Range{Min: 100, Max: 4000}}, ""},
		{" write=1..2, read=3..4 ,target=60", &stack.Capacity{Read: stack.Range{Min: 3, Max: 4}, Write: stack.Range{Min: 1, Max: 2}, TargetUtilization: 60}, ""},
		{"read=5..100", nil, "both read and write"},
		{"read=5-100,write=1..2", nil, `read="5-100"`},
		{"read=5..100,write=1..2,target=high", nil, `target="high"`},
		{"read=5..100,write=1..2,burst=3", nil, `unknown setting "burst"`},
		{"read=5..100,read=1..2", nil, "repeats"},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			c, err := capacitySetting(lookup(tt.value), contextStateRU)
			switch {
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), contextStateRU)):
				t.Fatalf("error %v, want one naming %s and containing %q", err, contextStateRU, tt.err)
			case tt.err == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tt.err == "" && !reflect.DeepEqual(c, tt.want):
				t.Fatalf("capacity %+v, want %+v", c, tt.want)
			}
		})
	}
}
