// Package emulator connects tests to the local stack (moto for DynamoDB and
// SQS) that scripts/localstack.sh starts, and can start a private moto
// server a test may kill.
//
// Tests that need the emulators call Config. Without the stack's endpoints
// in the environment they skip, unless FLEETBUCKET_INTEGRATION=1 (as
// scripts/test.sh sets), where they fail: CI must never pass by skipping.
package emulator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/ari"
	"github.com/fleetbucket/fleetbucket/sdk/pipeline/connections"
)

// Config returns an AWS config for the local stack, or for the endpoint the
// user brings (see PrefixEnv). It skips (fails under
// FLEETBUCKET_INTEGRATION=1) when neither is configured, and fails when an
// endpoint off this machine is set without a prefix.
func Config(tb testing.TB) aws.Config {
	tb.Helper()
	if err := checkEnv(); err != nil {
		if errors.Is(err, ErrNotConfigured) && os.Getenv("FLEETBUCKET_INTEGRATION") != "1" {
			tb.Skip(err)
		}
		tb.Fatal(err)
	}
	cfg, err := Load(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// DynamoDB returns a fresh client on the local stack's DynamoDB. Each call
// returns a new client, so simulated workers share no connection state.
func DynamoDB(tb testing.TB) *dynamodb.Client { return dynamodb.NewFromConfig(Config(tb), ForEmulator) }

// ForEmulator fits a DynamoDB client to the single-threaded moto server:
// no keep-alive. When a call is cancelled while its connection is being
// dialled, Go's transport still parks the new connection in its idle pool;
// the single-threaded server accepts it and waits for a request on it,
// serving nobody else, until the pool drops it 90 s later. Tests that end
// by cancelling calls in flight would stall every test after them.
func ForEmulator(o *dynamodb.Options) {
	o.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) { t.DisableKeepAlives = true })
}

// SQS returns a client on the local stack's SQS.
func SQS(tb testing.TB) *sqs.Client { return sqs.NewFromConfig(Config(tb)) }

// DynamoDBAt returns a client on a DynamoDB endpoint of the caller's choice
// (a private server from StartMoto).
func DynamoDBAt(tb testing.TB, endpoint string) *dynamodb.Client {
	tb.Helper()
	return dynamodb.NewFromConfig(Config(tb), ForEmulator, func(o *dynamodb.Options) { o.BaseEndpoint = &endpoint })
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

// NewTable creates a limiter table with a name unique to the test (and
// starting with Prefix) and deletes it when the test ends, so tests never
// see each other's buckets.
func NewTable(tb testing.TB, db *dynamodb.Client) string {
	tb.Helper()
	return newTable(tb, db, "t-"+tb.Name(), func(ctx context.Context, name string) error { return limiter.CreateTable(ctx, db, name) })
}

// NewStateTable creates a table for the pipeline's ARI state and lanes
// (sdk/pipeline/ari's layout), as NewTable does a limiter table.
func NewStateTable(tb testing.TB, db *dynamodb.Client) string {
	tb.Helper()
	return newTable(tb, db, "state-"+tb.Name(), func(ctx context.Context, name string) error { return ari.CreateTable(ctx, db, name) })
}

// NewConnectionsTable creates a connections table
// (sdk/pipeline/connections), as NewTable does a limiter table.
func NewConnectionsTable(tb testing.TB, db *dynamodb.Client) string {
	tb.Helper()
	return newTable(tb, db, "conn-"+tb.Name(), func(ctx context.Context, name string) error { return connections.CreateTable(ctx, db, name) })
}

func newTable(tb testing.TB, db *dynamodb.Client, base string, create func(context.Context, string) error) string {
	tb.Helper()
	name := Name(base, 255)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := create(ctx, name); err != nil {
		tb.Fatalf("create table %s: %v", name, err)
	}
	tb.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	})
	return name
}

// NewQueue creates a queue named after base (starting with Prefix), deletes
// it when the test ends, and returns its URL.
func NewQueue(tb testing.TB, q *sqs.Client, base string) string {
	tb.Helper()
	name := Name(base, 80)
	out, err := q.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: &name})
	if err != nil {
		tb.Fatalf("create queue %s: %v", name, err)
	}
	tb.Cleanup(func() { _, _ = q.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: out.QueueUrl}) })
	return *out.QueueUrl
}

// RepoRoot finds the module root by walking up to go.mod.
func RepoRoot(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Moto is a private moto server started by a test.
type Moto struct {
	Endpoint string
	cmd      *exec.Cmd
}

// StartMoto starts a single-threaded moto server on a free 127.0.0.1 port,
// for tests that need to kill their emulator. It is stopped by its PID when
// the test ends, if the test has not stopped it already.
func StartMoto(tb testing.TB) *Moto {
	tb.Helper()
	return startMoto(tb, "--single-threaded")
}

// StartThreadedMoto starts a threaded moto server, as the local stack runs
// for SQS (a long poll holds a request thread).
func StartThreadedMoto(tb testing.TB) *Moto {
	tb.Helper()
	return startMoto(tb, "--threaded")
}

func startMoto(tb testing.TB, mode string) *Moto {
	tb.Helper()
	Config(tb) // skip or fail the same way as every emulator test
	if Brought() {
		tb.Skip("starts a private moto server; not run against an endpoint you bring (" + PrefixEnv + " is set)")
	}
	portFile := filepath.Join(tb.TempDir(), "port")
	cmd := exec.Command(Python(tb), filepath.Join(RepoRoot(tb), "scripts", "moto_server.py"),
		"--port", "0", mode, "--port-file", portFile)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start moto: %v", err)
	}
	m := &Moto{cmd: cmd}
	tb.Cleanup(m.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(portFile); err == nil {
			if port, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				m.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
				return m
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatal("moto did not report its port within 30s")
	return nil
}

// Python is the interpreter that runs moto, by scripts/localstack.sh's rule:
// FLEETBUCKET_PYTHON (which the script exports with the stack's
// environment), else the first of python3 and .tools/venv/bin/python that
// can import moto.
func Python(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("FLEETBUCKET_PYTHON"); p != "" {
		return p
	}
	for _, p := range []string{"python3", filepath.Join(RepoRoot(tb), ".tools", "venv", "bin", "python")} {
		if exec.Command(p, "-c", "import moto, flask, werkzeug").Run() == nil {
			return p
		}
	}
	tb.Fatal("no Python with moto: run scripts/localstack.sh start (it installs moto into .tools/venv) or set FLEETBUCKET_PYTHON")
	return ""
}

// Stop kills the server by its PID and waits for it to exit.
func (m *Moto) Stop() {
	if m.cmd.Process == nil || m.cmd.ProcessState != nil {
		return
	}
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
}
