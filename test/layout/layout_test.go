// Package layout checks what the project promises about its own shape
// (docs/design.md, issue #28): no Go file of sdk/ is over 500 lines, so a
// concern that grows is split into files of its own before it hides in one.
package layout

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
