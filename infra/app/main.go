// Command app is fleetbucket's CDK app: cdk.json runs it (`go run ./infra/app`),
// so `scripts/cdk.sh synth` and `scripts/cdk.sh deploy` need nothing else.
//
// Before defining the stack it validates the connections config, builds the
// sync function for linux/arm64 into a temporary asset directory
// (bootstrap + connections.json) and computes the event sources' maximum
// concurrency from the config. CDK context (cdk.json or `-c key=value`):
//
//	config             connections file, relative to the repo root
//	                   (default config/connections.example.json)
//	maxConcurrency     overrides the value computed from the config (2..1000)
//	stackName          default FleetbucketSync
//	busName            default fleetbucket-pms
//	tokenSecretPrefix  default fleetbucket/: a credential with secret_id is
//	                   read from that Secrets Manager secret; one with
//	                   token_env (a local-run setting) is deployed as
//	                   secret_id <prefix><token_env>. The function reads the
//	                   secrets at run time, and its role may GetSecretValue
//	                   on exactly those; no token is in its environment.
//	reservedConcurrency the function's reserved concurrency; default
//	                   computed: 2 × maxConcurrency + 10 % (at least 2);
//	                   "none" for no reservation; a number must be at least
//	                   2 × maxConcurrency
//	alarmTopicArn      an existing SNS topic for every alarm; default: the
//	                   stack creates one
//	alarmEmail         subscribe this address to the created topic
//	maxQueueAgeSeconds freshness alarms' threshold, default 300 (the
//	                   deferred queue's alarm adds its 900 s delay)
//	maxThrottlePercent 429s as a share of OTA requests over 5 minutes that
//	                   pages, default 5
//	throttleAlarmMinRequests  requests in those 5 minutes below which the
//	                   share is not evaluated, default 20
//	storeErrorMinutes  consecutive minutes with limiter store errors that
//	                   page, default 3
//	limiterCapacity    provisioned capacity with auto scaling for the
//	stateCapacity      limiter / ARI state table, e.g.
//	                   "read=5..100,write=100..4000,target=70" (capacity
//	                   units a second; target utilization in percent,
//	                   default 70); default: on demand. See stack.Capacity
//	                   for when it pays.
//	parityChecks       parity checks on a schedule, a JSON array of
//	                   {"property", "channel", "every": "24h", "days": 365};
//	                   each channel needs a "read" endpoint (see
//	                   docs/operations.md, parity)
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/fleetbucket/fleetbucket/infra/stack"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/config"
)

const (
	modulePath       = "github.com/fleetbucket/fleetbucket"
	defaultConfig    = "config/connections.example.json"
	defaultStackName = "FleetbucketSync"
	functionPackage  = "./functions/sync"
	contextConfig    = "config"
	contextMaxConc   = "maxConcurrency"
	contextStackName = "stackName"
	contextBusName   = "busName"
	contextSecretPfx = "tokenSecretPrefix"
	contextReserved  = "reservedConcurrency"
	contextTopicArn  = "alarmTopicArn"
	contextEmail     = "alarmEmail"
	contextQueueAge  = "maxQueueAgeSeconds"
	contextThrottle  = "maxThrottlePercent"
	contextMinReqs   = "throttleAlarmMinRequests"
	contextStoreErrs = "storeErrorMinutes"
	contextLimiterRU = "limiterCapacity"
	contextStateRU   = "stateCapacity"
	defaultSecretPfx = "fleetbucket/"
	assetDirPrefix   = "fleetbucket-sync-asset-"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "fleetbucket cdk app: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	defer jsii.Close()
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	app := awscdk.NewApp(nil)
	ctx := func(key string) (string, bool) {
		v := app.Node().TryGetContext(jsii.String(key))
		if v == nil {
			return "", false
		}
		switch v := v.(type) {
		case string:
			return v, v != ""
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64), true
		default:
			return fmt.Sprint(v), true
		}
	}
	configPath, _ := ctx(contextConfig)
	override, _ := ctx(contextMaxConc)
	prefix := defaultSecretPfx
	if v, ok := ctx(contextSecretPfx); ok {
		prefix = v
	}

	alarms, reserved, err := alarmSettings(ctx)
	if err != nil {
		return err
	}
	limiterCap, err := capacitySetting(ctx, contextLimiterRU)
	if err != nil {
		return err
	}
	stateCap, err := capacitySetting(ctx, contextStateRU)
	if err != nil {
		return err
	}

	asset, err := prepareAsset(assetOptions{
		Root:           root,
		ConfigPath:     configPath,
		Package:        functionPackage,
		MaxConcurrency: override,
		SecretPrefix:   prefix,
	})
	if err != nil {
		return err
	}
	defer asset.Cleanup()

	deployed, err := config.Parse(asset.Config)
	if err != nil {
		return err
	}
	parityChecks, err := paritySetting(app.Node().TryGetContext(jsii.String(contextParity)), deployed)
	if err != nil {
		return err
	}

	stackName := defaultStackName
	if v, ok := ctx(contextStackName); ok {
		stackName = v
	}
	busName, _ := ctx(contextBusName)
	s, err := stack.NewSyncStack(app, stackName, &stack.Props{
		AssetDir:            asset.Dir,
		MaxConcurrency:      asset.MaxConcurrency,
		BusName:             busName,
		TokenSecretIDs:      asset.TokenSecretIDs,
		ReservedConcurrency: reserved,
		Alarms:              alarms,
		Quotas:              asset.Quotas,
		LimiterCapacity:     limiterCap,
		StateCapacity:       stateCap,
		ParityChecks:        parityChecks,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "fleetbucket cdk app: stack %s, config %s, maxConcurrency %d (%s), reserved concurrency %d, %d token secret(s) under %q\n",
		stackName, asset.ConfigPath, asset.MaxConcurrency, asset.MaxConcurrencySource, s.ReservedConcurrency, len(asset.TokenSecretIDs), prefix)
	// Synth copies the asset directory into the cloud assembly (cdk.out),
	// so the temporary directory can go afterwards.
	app.Synth(nil)
	return nil
}

// assetOptions says what prepareAsset builds.
type assetOptions struct {
	Root           string // module root (holds go.mod)
	ConfigPath     string // connections file; relative to Root; "" = defaultConfig
	Package        string // the function's package, relative to Root
	MaxConcurrency string // context override; "" = computed from the config
	TempDir        string // parent of the asset directory; "" = os.TempDir()
	SecretPrefix   string // secret_id of a token_env credential: SecretPrefix + token_env
}

// asset is a built asset directory.
type asset struct {
	Dir                  string
	ConfigPath           string
	MaxConcurrency       int
	MaxConcurrencySource string
	TokenSecretIDs       []string      // the deployed config's secret_ids, sorted, distinct
	Quotas               []stack.Quota // one per (channel, credential, endpoint), for the dashboard
	// Config is the connections config as deployed: every credential a
	// secret_id (token_env ones become SecretPrefix + token_env).
	Config  []byte
	Cleanup func()
}

// deployedCredentials turns every token_env credential of cfg into a
// secret_id (prefix + token_env) and returns the secret ids, sorted and
// distinct.
func deployedCredentials(cfg *config.Config, prefix string) []string {
	seen := map[string]bool{}
	var ids []string
	for _, ch := range cfg.Channels {
		for id, cred := range ch.Credentials {
			if cred.SecretID == "" {
				cred = config.Credential{SecretID: prefix + cred.TokenEnv}
				ch.Credentials[id] = cred
			}
			if !seen[cred.SecretID] {
				seen[cred.SecretID] = true
				ids = append(ids, cred.SecretID)
			}
		}
	}
	sort.Strings(ids)
	return ids
}

// quotas lists every bucket of cfg: each channel's credentials × meters
// (endpoints that share a meter share its bucket, and its limits: the
// config refuses them otherwise).
func quotas(cfg *config.Config) []stack.Quota {
	var out []stack.Quota
	seen := map[string]bool{}
	for chName, ch := range cfg.Channels {
		for credID := range ch.Credentials {
			for epName, ep := range ch.Endpoints {
				q := stack.Quota{Channel: chName, Credential: credID, Meter: ch.MeterOf(epName), Rate: ep.Limit.Rate, Burst: ep.Limit.Burst}
				if !seen[q.Bucket()] {
					seen[q.Bucket()] = true
					out = append(out, q)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Bucket() < out[j].Bucket() })
	return out
}

// alarmSettings reads the alarms' context keys and reservedConcurrency
// (0: computed by the stack; stack.NoReservedConcurrency for "none").
func alarmSettings(ctx func(string) (string, bool)) (stack.Alarms, int, error) {
	var a stack.Alarms
	a.TopicArn, _ = ctx(contextTopicArn)
	a.Email, _ = ctx(contextEmail)
	integer := func(key string, min int) (int, error) {
		v, ok := ctx(key)
		if !ok {
			return 0, nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < min {
			return 0, fmt.Errorf("context %s=%q: want an integer ≥ %d", key, v, min)
		}
		return n, nil
	}
	age, err := integer(contextQueueAge, 1)
	if err != nil {
		return a, 0, err
	}
	a.MaxQueueAge = time.Duration(age) * time.Second
	if a.ThrottleAlarmMinRequests, err = integer(contextMinReqs, 1); err != nil {
		return a, 0, err
	}
	if a.StoreErrorMinutes, err = integer(contextStoreErrs, 1); err != nil {
		return a, 0, err
	}
	if v, ok := ctx(contextThrottle); ok {
		pct, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(pct > 0 && pct <= 100) {
			return a, 0, fmt.Errorf("context %s=%q: want a percentage in (0, 100]", contextThrottle, v)
		}
		a.MaxThrottlePercent = pct
	}
	reserved := 0
	if v, ok := ctx(contextReserved); ok && strings.TrimSpace(v) == "none" {
		reserved = stack.NoReservedConcurrency
	} else if reserved, err = integer(contextReserved, 1); err != nil {
		return a, 0, fmt.Errorf("%w, or \"none\"", err)
	}
	return a, reserved, nil
}

// capacitySetting reads a table's provisioned capacity from context key,
// "read=MIN..MAX,write=MIN..MAX[,target=PERCENT]"; none is on demand (nil).
// The stack checks the ranges themselves.
func capacitySetting(ctx func(string) (string, bool), key string) (*stack.Capacity, error) {
	v, ok := ctx(key)
	if !ok {
		return nil, nil
	}
	bad := func(why string) error {
		return fmt.Errorf("context %s=%q: %s; want read=MIN..MAX,write=MIN..MAX[,target=PERCENT]", key, v, why)
	}
	var c stack.Capacity
	seen := map[string]bool{}
	for _, part := range strings.Split(v, ",") {
		name, val, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found || seen[name] {
			return nil, bad(fmt.Sprintf("%q is not one name=value, or repeats one", part))
		}
		seen[name] = true
		switch name {
		case "read", "write":
			lo, hi, found := strings.Cut(val, "..")
			from, err1 := strconv.Atoi(lo)
			to, err2 := strconv.Atoi(hi)
			if !found || err1 != nil || err2 != nil {
				return nil, bad(fmt.Sprintf("%s=%q is not MIN..MAX in whole units", name, val))
			}
			if name == "read" {
				c.Read = stack.Range{Min: from, Max: to}
			} else {
				c.Write = stack.Range{Min: from, Max: to}
			}
		case "target":
			n, err := strconv.Atoi(val)
			if err != nil {
				return nil, bad(fmt.Sprintf("target=%q is not a whole percentage", val))
			}
			c.TargetUtilization = n
		default:
			return nil, bad(fmt.Sprintf("unknown setting %q", name))
		}
	}
	if !seen["read"] || !seen["write"] {
		return nil, bad("both read and write are needed")
	}
	return &c, nil
}

// resolveConfig validates the connections config and works out the event
// sources' maximum concurrency: the context override, else the value the
// config's limits call for.
func resolveConfig(o assetOptions) (*asset, error) {
	cfgPath := o.ConfigPath
	if cfgPath == "" {
		cfgPath = defaultConfig
	}
	if !filepath.IsAbs(cfgPath) {
		cfgPath = filepath.Join(o.Root, cfgPath)
	}
	fi, err := os.Stat(cfgPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("connections config %s does not exist (set it with -c %s=<path>, relative to the repo root)", cfgPath, contextConfig)
		}
		return nil, fmt.Errorf("connections config: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("connections config %s is not a regular file", cfgPath)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("connections config %s is invalid: %w", cfgPath, err)
	}

	a := &asset{ConfigPath: cfgPath, Cleanup: func() {}}
	a.TokenSecretIDs = deployedCredentials(cfg, o.SecretPrefix)
	a.Quotas = quotas(cfg)
	if a.Config, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		return nil, fmt.Errorf("connections config: %w", err)
	}
	if _, err := config.Parse(a.Config); err != nil {
		return nil, fmt.Errorf("connections config %s as deployed (token_env as secret_id %s<token_env>) is invalid: %w", cfgPath, o.SecretPrefix, err)
	}
	if o.MaxConcurrency != "" {
		n, err := strconv.Atoi(strings.TrimSpace(o.MaxConcurrency))
		if err != nil {
			return nil, fmt.Errorf("context %s=%q is not an integer", contextMaxConc, o.MaxConcurrency)
		}
		a.MaxConcurrency, a.MaxConcurrencySource = n, "context "+contextMaxConc
	} else {
		a.MaxConcurrency, a.MaxConcurrencySource = cfg.MaxConcurrency(), "computed from the config's limits"
	}
	if a.MaxConcurrency < stack.MinMaxConcurrency || a.MaxConcurrency > stack.MaxMaxConcurrency {
		return nil, fmt.Errorf("maxConcurrency %d (%s) is outside [%d, %d]",
			a.MaxConcurrency, a.MaxConcurrencySource, stack.MinMaxConcurrency, stack.MaxMaxConcurrency)
	}
	return a, nil
}

// prepareAsset resolves the config (resolveConfig), then builds the
// function into a new temporary directory with the config beside it.
// Everything cheap is checked before the build.
func prepareAsset(o assetOptions) (*asset, error) {
	a, err := resolveConfig(o)
	if err != nil {
		return nil, err
	}
	pkgDir := filepath.Join(o.Root, filepath.FromSlash(o.Package))
	if fi, err := os.Stat(pkgDir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("function package %s not found in %s", o.Package, o.Root)
	}

	dir, err := os.MkdirTemp(o.TempDir, assetDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("asset directory: %w", err)
	}
	a.Dir = dir
	a.Cleanup = func() { _ = os.RemoveAll(dir) }
	fail := func(err error) (*asset, error) {
		a.Cleanup()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, stack.ConnectionsFile), a.Config, 0o644); err != nil {
		return fail(fmt.Errorf("writing the connections config: %w", err))
	}
	// -trimpath and -buildvcs=false make the binary, and so the asset hash,
	// depend on the sources only: an unchanged function is not redeployed.
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-tags", "lambda.norpc",
		"-o", filepath.Join(dir, stack.BootstrapFile), o.Package)
	cmd.Dir = o.Root
	// GOWORK=off: the function is built from the root module's go.mod (which
	// replaces the SDK module with ./sdk), as in a clone without go.work.
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0", "GOWORK=off")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fail(fmt.Errorf("building %s for linux/arm64: %w", o.Package, err))
	}
	// The zip keeps file modes and Lambda runs the code as another user:
	// bootstrap must be world-executable and the config world-readable
	// whatever the umask was.
	for name, mode := range map[string]os.FileMode{stack.BootstrapFile: 0o755, stack.ConnectionsFile: 0o644} {
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			return fail(err)
		}
	}
	return a, nil
}

// moduleRoot finds the fleetbucket module's root from the working
// directory upwards (cdk runs the app from the directory of cdk.json).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s in the working directory or above it; run from the repository", modulePath)
		}
		dir = parent
	}
}
