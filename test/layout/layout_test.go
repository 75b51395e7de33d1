// Package layout checks what the project promises about its own shape
// (docs/design.md, issue #28): no Go file of sdk/ is over 500 lines, so a
// concern that grows is split into files of its own before it hides in one;
// a lane job's path enters each file of sdk/pipeline for at most two steps
// (test/pathtrace counts them); and no context of sdk/pipeline carries a
// value.
package layout

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fleetbucket/fleetbucket/test/emulator"
)

const maxLines = 500

func TestNoSDKFileIsOverFiveHundredLines(t *testing.T) {
	root := filepath.Join("..", "..", "sdk")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		if n := bytes.Count(b, []byte("\n")); n > maxLines {
			t.Errorf("%s has %d lines, over %d: split it by concern", path, n, maxLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked %d Go files under %s, want the SDK's (over 100): is the path right?", checked, root)
	}
}

func TestLaneJobPathEntersEachFileForAtMostTwoSteps(t *testing.T) {
	emulator.Config(t) // the traced test runs on the local stack
	if testing.Short() {
		t.Skip("builds and runs functions/sync's TestLaneJobPath instrumented (about a minute)")
	}
	cmd := exec.Command("go", "run", "./test/pathtrace", "-max", "2")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./test/pathtrace -max 2: %v\n%s", err, tail(out, 120))
	}
}

// tail is the last n lines of out: the trace's table and the verdict.
func tail(out []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(out, "\n"), []byte("\n"))
	return bytes.Join(lines[max(0, len(lines)-n):], []byte("\n"))
}

// TestNoContextValueInThePipeline checks that sdk/pipeline passes nothing
// that steers a decision through a context (docs/design.md, "Calls go one
// way"): a context carries cancellation and deadlines, and the invocation,
// a call's hold and a push's lease are parameters or fields.
func TestNoContextValueInThePipeline(t *testing.T) {
	root := filepath.Join("..", "..", "sdk", "pipeline")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "WithValue" {
				if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "context" {
					t.Errorf("%s: context.WithValue: pass the value as a parameter or a field", path)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d Go files under %s, want the pipeline's (over 50): is the path right?", checked, root)
	}
}
