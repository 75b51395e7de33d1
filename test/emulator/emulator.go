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
	"fmt"
	"math/rand/v2"
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
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/fleetbucket/fleetbucket/sdk/limiter"
)

// Config returns an AWS config for the local stack, or skips (fails under
// FLEETBUCKET_INTEGRATION=1) when no stack is configured.
func Config(tb testing.TB) aws.Config {
	tb.Helper()
	if os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") == "" || os.Getenv("AWS_ENDPOINT_URL_SQS") == "" {
		msg := `local stack not configured: run eval "$(scripts/localstack.sh start)" first, or use scripts/test.sh`
		if os.Getenv("FLEETBUCKET_INTEGRATION") == "1" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
	)
	if err != nil {
		tb.Fatalf("load AWS config: %v", err)
	}
	cfg.Logger = QuietCancelled(cfg.Logger)
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

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

// NewTable creates a limiter table with a name unique to the test and
// deletes it when the test ends, so tests never see each other's buckets.
func NewTable(tb testing.TB, db *dynamodb.Client) string {
	tb.Helper()
	name := unsafeChars.ReplaceAllString(tb.Name(), "-")
	if len(name) > 200 {
		name = name[:200]
	}
	name = fmt.Sprintf("t-%s-%08x", name, rand.Uint32())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := limiter.CreateTable(ctx, db, name); err != nil {
		tb.Fatalf("create table: %v", err)
	}
	tb.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: &name})
	})
	return name
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
	Config(tb) // skip or fail the same way as every emulator test
	portFile := filepath.Join(tb.TempDir(), "port")
	cmd := exec.Command(Python(tb), filepath.Join(RepoRoot(tb), "scripts", "moto_server.py"),
		"--port", "0", "--single-threaded", "--port-file", portFile)
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
