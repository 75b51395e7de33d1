// Package adopt checks what a service inherits when it adopts one package
// of the SDK and nothing else: it builds a scratch module outside the
// repository that imports only that package, lets `go mod tidy` write its
// go.mod and go.sum, and reads them and the module graph. It also checks
// that the SDK module builds from its own go.mod alone, and that the
// oracle it carries (package window) imports nothing of the SDK.
//
// The go command runs offline (GOPROXY=off): everything the scratch module
// may need is what building this repository put in the module cache.
package adopt

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The modules only the repository's own programs use: the CLI (cobra), the
// Lambda function (aws-lambda-go), the simulation (minidyn), the CDK app and
// the comparison benchmarks. A service that imports only the SDK must see
// none of them in its go.mod, its go.sum or its module graph.
var programsOnly = []string{
	"github.com/spf13/cobra",
	"github.com/aws/aws-lambda-go",
	"github.com/truora/minidyn",
	"github.com/aws/aws-cdk-go/awscdk/v2",
	"github.com/mennanov/limiters",
}

// TestLimiterModuleNeedsOnlyItsOwnDependencies adopts sdk/limiter alone,
// and sdk/otapush alone, in a scratch module that requires the module
// providing the package (found by asking the go command, so the test
// follows the layout rather than assuming it) through a replace.
func TestLimiterModuleNeedsOnlyItsOwnDependencies(t *testing.T) {
	root := repoRoot(t)
	for _, pkg := range []string{
		"github.com/fleetbucket/fleetbucket/sdk/limiter",
		"github.com/fleetbucket/fleetbucket/sdk/otapush",
	} {
		t.Run(filepath.Base(pkg), func(t *testing.T) {
			mod := strings.Fields(goCmd(t, root, "list", "-mod=readonly", "-f", "{{.Module.Path}} {{.Module.Dir}}", pkg))
			if len(mod) != 2 {
				t.Fatalf("go list %s: module %q, want a path and a directory", pkg, mod)
			}
			modPath, modDir := mod[0], mod[1]
			if modPath == "github.com/fleetbucket/fleetbucket" {
				t.Errorf("%s is in the root module, with the programs' requirements", pkg)
			}

			dir := t.TempDir()
			write(t, filepath.Join(dir, "main.go"), "package main\n\nimport _ \""+pkg+"\"\n\nfunc main() {}\n")
			write(t, filepath.Join(dir, "go.mod"), "module example.com/adopt\n\ngo 1.26.0\n\n"+
				"require "+modPath+" v0.0.0\n\nreplace "+modPath+" => "+modDir+"\n")
			// The provider's checksums, so that tidy looks nothing up.
			sum, err := os.ReadFile(filepath.Join(modDir, "go.sum"))
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "go.sum"), string(sum))

			goCmd(t, dir, "mod", "tidy")
			goCmd(t, dir, "build", "./...")
			graph := goCmd(t, dir, "list", "-m", "all")
			for _, seen := range []struct{ where, text string }{
				{"go.mod", read(t, filepath.Join(dir, "go.mod"))},
				{"go.sum", read(t, filepath.Join(dir, "go.sum"))},
				{"go list -m all", graph},
				{"go mod graph", goCmd(t, dir, "mod", "graph")},
				{"the import list", goCmd(t, dir, "list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}}", pkg)},
			} {
				for _, m := range programsOnly {
					if mentions(seen.text, m) {
						t.Errorf("a service importing only %s finds %s in its %s (%s is what provides the package)", pkg, m, seen.where, modPath)
					}
				}
			}
			if t.Failed() {
				t.Logf("go list -m all:\n%s", graph)
			}
		})
	}
}

// TestSDKModuleBuildsAlone lists every package of the SDK module and what
// its tests import, outside the workspace: in go.work's workspace an import
// of the root module's packages (internal/..., test/...) would resolve, and
// a service building the SDK from its own go.mod would find it missing.
func TestSDKModuleBuildsAlone(t *testing.T) {
	sdk := filepath.Join(repoRoot(t), "sdk")
	mods := goCmd(t, sdk, "list", "-mod=readonly", "-deps", "-test", "-f", "{{with .Module}}{{.Path}}{{end}}", "./...")
	seen := map[string]bool{}
	for line := range strings.Lines(mods) {
		m := strings.TrimSpace(line)
		if strings.HasPrefix(m, "github.com/fleetbucket/") && m != "github.com/fleetbucket/fleetbucket/sdk" && !seen[m] {
			seen[m] = true
			t.Errorf("the SDK module's packages or tests import from module %s", m)
		}
	}
}

// TestWindowImportsNothingOfTheSDK keeps the oracle apart from what it
// checks: package window lives in the SDK module (its tests and the mock
// OTA both use it) but may import only the standard library.
func TestWindowImportsNothingOfTheSDK(t *testing.T) {
	const window = "github.com/fleetbucket/fleetbucket/sdk/limiter/limitertest/window"
	deps := goCmd(t, filepath.Join(repoRoot(t), "sdk"), "list", "-mod=readonly", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", window)
	for line := range strings.Lines(deps) {
		if p := strings.TrimSpace(line); p != "" && p != window {
			t.Errorf("package window imports %s: the oracle must share no code with the SDK", p)
		}
	}
}

// mentions reports whether text names module m as a whole word: a path
// followed by a space, @, / or the end of a line.
func mentions(text, m string) bool {
	for line := range strings.Lines(text) {
		for _, f := range strings.Fields(line) {
			if f == m || strings.HasPrefix(f, m+"@") || strings.HasPrefix(f, m+"/") {
				return true
			}
		}
	}
	return false
}

// goCmd runs the go command in dir offline and outside any workspace, and
// returns its standard output.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOFLAGS=-mod=mod", "GOSUMDB=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return stdout.String()
}

// repoRoot is the directory of the root module's go.mod, two up from here.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(read(t, filepath.Join(root, "go.mod")), "module github.com/fleetbucket/fleetbucket\n") {
		t.Fatalf("%s is not the repository's root", root)
	}
	return root
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
