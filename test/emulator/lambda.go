package emulator

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Lambda is a function's real bootstrap binary running under
// aws-lambda-rie, the runtime interface emulator.
type Lambda struct {
	url string
	cmd *exec.Cmd
	// mu serializes invocations: the emulator crashes on concurrent ones.
	mu sync.Mutex
}

// BuildFunction compiles a function's main package for this machine into a
// fresh directory and returns the binary's path.
func BuildFunction(tb testing.TB, pkg string) string {
	tb.Helper()
	out := filepath.Join(tb.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", out, pkg)
	cmd.Dir = RepoRoot(tb)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// rieBinary finds aws-lambda-rie in .tools/bin (scripts/test.sh installs it
// there) or on PATH.
func rieBinary(tb testing.TB) string {
	tb.Helper()
	local := filepath.Join(RepoRoot(tb), ".tools", "bin", "aws-lambda-rie")
	if _, err := os.Stat(local); err == nil {
		return local
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p
	}
	msg := "aws-lambda-rie not found: scripts/test.sh installs it into .tools/bin"
	if os.Getenv("FLEETBUCKET_INTEGRATION") == "1" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// StartLambda runs bootstrap under the emulator on 127.0.0.1 with the given
// environment (on top of this process's), and stops it by its PID when the
// test ends.
func StartLambda(tb testing.TB, bootstrap string, env []string) *Lambda {
	tb.Helper()
	rie := rieBinary(tb)
	apiPort, runtimePort := freePort(tb), freePort(tb)
	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", fmt.Sprintf("127.0.0.1:%d", apiPort),
		"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", runtimePort),
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start aws-lambda-rie: %v", err)
	}
	l := &Lambda{url: fmt.Sprintf("http://127.0.0.1:%d/2015-03-31/functions/function/invocations", apiPort), cmd: cmd}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", apiPort)); err == nil {
			c.Close()
			return l
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatal("aws-lambda-rie did not listen within 20s")
	return nil
}

// Invoke sends one event and returns the function's response body. Handler
// errors come back as a 200 with {"errorMessage": ...}, as the emulator
// answers them.
func (l *Lambda) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.url, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("invoke: %s: %s", resp.Status, body)
	}
	return body, nil
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
