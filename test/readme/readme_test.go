// Package readme checks that the README's Go code compiles as pasted.
package readme

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// implicit is what a README block may use without importing it: the
// packages of a service's own code around the snippet. ctx and awsCfg are
// the variables it may use without declaring them.
var implicit = map[string]string{
	"context":  "context",
	"aws":      "github.com/aws/aws-sdk-go-v2/aws",
	"dynamodb": "github.com/aws/aws-sdk-go-v2/service/dynamodb",
	"errors":   "errors",
	"fmt":      "fmt",
	"log":      "log",
	"time":     "time",
}

// TestREADMEGoBlocksBuild builds every Go block of the README: a block
// that is a whole file as it is, any other as the body of a function with
// ctx (context.Context) and awsCfg (aws.Config) in scope, its import
// lines at the top. A variable declared and never used, a call with the
// wrong arguments, a name the API no longer has: each fails the build.
func TestREADMEGoBlocksBuild(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```go\n(.*?)^```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("the README has no Go block")
	}
	tmp := t.TempDir()
	overlay := map[string]string{}
	var pkgs []string
	for i, b := range blocks {
		name := fmt.Sprintf("snippet%d", i)
		src := b[1]
		if !strings.HasPrefix(src, "package ") {
			src = wrap(name, src)
		}
		file := filepath.Join(tmp, name+".go")
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay[filepath.Join(root, "test", "readme", name, "snippet.go")] = file
		pkgs = append(pkgs, "./test/readme/"+name)
	}
	ov, _ := json.Marshal(map[string]any{"Replace": overlay})
	if err := os.WriteFile(filepath.Join(tmp, "overlay.json"), ov, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"build", "-overlay", filepath.Join(tmp, "overlay.json")}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's Go blocks do not build (snippetN is the README's N-th block, from 0):\n%s", out)
	}
}

// wrap makes the statements of block a file of package name: its import
// lines first, with the implicit packages it names, and the rest as the
// body of a function with ctx and awsCfg in scope.
func wrap(name, block string) string {
	var imports, body []string
	for _, line := range strings.Split(block, "\n") {
		if strings.HasPrefix(line, "import ") {
			imports = append(imports, strings.TrimSpace(strings.TrimPrefix(line, "import ")))
			continue
		}
		body = append(body, line)
	}
	code := strings.Join(body, "\n")
	for pkg, path := range implicit {
		if pkg == "context" || pkg == "aws" || regexp.MustCompile(`\b`+pkg+`\.`).MatchString(code) {
			imports = append(imports, fmt.Sprintf("%q", path))
		}
	}
	return fmt.Sprintf("package %s\n\nimport (\n\t%s\n)\n\nfunc example(ctx context.Context, awsCfg aws.Config) {\n%s\n}\n",
		name, strings.Join(imports, "\n\t"), code)
}
