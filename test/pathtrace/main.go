// Command pathtrace counts how often each file of sdk/pipeline is entered
// on a lane job's path: one PMS change through the sync function with the
// defaults, until its lane's push is in and no message is left
// (functions/sync's TestLaneJobPath, against the local stack).
//
// It builds that test with every function and function literal of
// sdk/pipeline (tests aside) instrumented through go build's -overlay,
// the files on disk untouched: the first statement of each body records
// the function and its caller (runtime.Callers) in a trace file. A file
// is entered when one of its functions is called from a function of
// another file; calls within a file are not entries, and neither are
// calls back from the standard library (a goroutine sync.WaitGroup.Go
// starts, a sort's comparison, a String method the logger calls), which
// are counted apart.
//
//	eval "$(scripts/localstack.sh start)"; export FLEETBUCKET_INTEGRATION=1
//	go run ./test/pathtrace [-max 2 [-allow dispatch/decide.go=4,...]]
//
// It prints each file's entries twice: every call counted, and leaf calls
// aside (a call that returns without calling another function of
// sdk/pipeline: an accessor such as Dispatcher.now, a value's method such
// as lane.ID.String), which are the path's steps. With -max, it fails
// when a file is entered for a step more often than that, or than -allow
// grants the files it names (paths under sdk/pipeline/); test/layout runs
// it so on the local stack.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"log"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

const hook = `package %s

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

var pathtraceFile = sync.OnceValue(func() *os.File {
	path := os.Getenv("FLEETBUCKET_PATHTRACE")
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil
	}
	return f
})

func pathtraceEnter() {
	f := pathtraceFile()
	if f == nil {
		return
	}
	var pcs [256]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	callee, more := frames.Next()
	var caller runtime.Frame
	if more {
		caller, more = frames.Next()
	}
	depth := 2
	for more {
		_, more = frames.Next()
		depth++
	}
	var buf [64]byte
	g := string(buf[:runtime.Stack(buf[:], false)]) // "goroutine 7 [running]:..."
	g = strings.Fields(g)[1]
	_, _ = f.WriteString(callee.File + "\t" + callee.Function + "\t" + caller.File + "\t" + caller.Function + "\t" + g + "\t" + strconv.Itoa(depth) + "\n")
}
`

func main() {
	maxEntries := flag.Int("max", 0, "fail when a file is entered for a step (leaf calls aside) more often than this (0: report only)")
	keep := flag.Bool("keep", false, "keep the instrumented copy and the trace")
	allowFlag := flag.String("allow", "", "file=N,...: files of sdk/pipeline/ that may be entered for up to N steps, over -max")
	flag.Parse()
	allow, err := parseAllow(*allowFlag)
	if err != nil {
		log.Fatal(err)
	}
	log.SetFlags(0)
	root, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "sdk", "pipeline")); err != nil {
		log.Fatal("run from the repository's root: ", err)
	}
	tmp, err := os.MkdirTemp("", "pathtrace-")
	if err != nil {
		log.Fatal(err)
	}
	if !*keep {
		defer os.RemoveAll(tmp)
	}
	overlay, err := instrument(filepath.Join(root, "sdk", "pipeline"), tmp)
	if err != nil {
		log.Fatal(err)
	}
	ov := filepath.Join(tmp, "overlay.json")
	b, _ := json.Marshal(map[string]any{"Replace": overlay})
	if err := os.WriteFile(ov, b, 0o644); err != nil {
		log.Fatal(err)
	}
	trace := filepath.Join(tmp, "trace.tsv")
	if err := tracePath(ov, trace); err != nil {
		log.Fatal(err)
	}
	steps, err := report(trace, filepath.Join(root, "sdk", "pipeline")+string(filepath.Separator))
	if err != nil {
		log.Fatal(err)
	}
	if *keep {
		fmt.Println("trace:", trace)
	}
	if *maxEntries > 0 {
		if over := overLimit(steps, *maxEntries, allow); len(over) > 0 {
			log.Fatalf("files of sdk/pipeline entered for more steps on the path than allowed: %s", strings.Join(over, "; "))
		}
	}
}

// pathInvocations is how many invocations the lane job's path takes with
// the defaults: the change's, which marks the lane and defers its job,
// and the deferred job's, which pushes. A run that takes more is another
// path, not this one: a job a slow store's slot sends back once more.
// (A change delivered twice is not: TestLaneJobPath hands the function
// one delivery.)
const pathInvocations = 2

// pathTries bounds how many times the path is traced for a run of
// pathInvocations.
const pathTries = 3

// tracePath runs functions/sync's TestLaneJobPath instrumented by overlay
// ov, its trace in trace, until a run takes pathInvocations.
func tracePath(ov, trace string) error {
	counts := make([]int, 0, pathTries)
	for range pathTries {
		if err := os.Remove(trace); err != nil && !os.IsNotExist(err) {
			return err
		}
		var out strings.Builder
		cmd := exec.Command("go", "test", "-count=1", "-overlay", ov, "-run", "^TestLaneJobPath$", "-v", "./functions/sync/")
		cmd.Env = append(os.Environ(), "FLEETBUCKET_PATHTRACE="+trace)
		cmd.Stdout, cmd.Stderr = io.MultiWriter(os.Stderr, &out), os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("the traced test failed: %w", err)
		}
		n, err := invocations(out.String())
		if err != nil {
			return err
		}
		if n == pathInvocations {
			return nil
		}
		counts = append(counts, n)
		fmt.Fprintf(os.Stderr, "pathtrace: the run took %d invocations, the path %d: tracing again\n", n, pathInvocations)
	}
	return fmt.Errorf("the traced test took %v invocations in its %d runs, never the path's %d", counts, pathTries, pathInvocations)
}

// invocations reads the count TestLaneJobPath logs ("N invocations").
func invocations(out string) (int, error) {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "invocations" {
			return strconv.Atoi(f[1])
		}
	}
	return 0, fmt.Errorf("the traced test logged no invocation count")
}

// parseAllow reads -allow: file=N pairs, comma-separated.
func parseAllow(s string) (map[string]int, error) {
	allow := map[string]int{}
	for _, pair := range strings.Split(s, ",") {
		if pair == "" {
			continue
		}
		file, n, ok := strings.Cut(pair, "=")
		limit, err := strconv.Atoi(n)
		if !ok || err != nil || limit < 1 {
			return nil, fmt.Errorf("-allow %q: want file=N, N at least 1", pair)
		}
		allow[file] = limit
	}
	return allow, nil
}

// overLimit names each file entered for more steps than its limit
// (allow's, or maxSteps), and each file allow names that is entered for fewer
// steps than it grants, so that an allowance is lowered as its file is.
func overLimit(steps map[string]int, maxSteps int, allow map[string]int) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(steps)) {
		limit, named := allow[name]
		if !named {
			limit = maxSteps
		}
		if steps[name] > limit {
			out = append(out, fmt.Sprintf("%s %d (at most %d)", name, steps[name], limit))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(allow)) {
		if steps[name] < allow[name] {
			out = append(out, fmt.Sprintf("%s %d, under its allowance of %d: lower it", name, steps[name], allow[name]))
		}
	}
	return out
}

// instrument writes a copy of every non-test Go file under dir into tmp
// with a call to the package's pathtraceEnter as the first statement of
// each function body (inserted on the brace's line, so that line numbers
// stay those of the original), and a file declaring pathtraceEnter per
// package. It returns the overlay: original path → copy.
func instrument(dir, tmp string) (map[string]string, error) {
	overlay := map[string]string{}
	pkgs := map[string]string{} // directory → package name
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		var at []int // offsets just after each body's opening brace
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Body != nil {
					at = append(at, fset.Position(n.Body.Lbrace).Offset+1)
				}
			case *ast.FuncLit:
				at = append(at, fset.Position(n.Body.Lbrace).Offset+1)
			}
			return true
		})
		slices.Sort(at)
		var out strings.Builder
		last := 0
		for _, off := range at {
			out.Write(src[last:off])
			out.WriteString("pathtraceEnter();")
			last = off
		}
		out.Write(src[last:])
		rel, _ := filepath.Rel(dir, path)
		cp := filepath.Join(tmp, "src", rel)
		if err := os.MkdirAll(filepath.Dir(cp), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(cp, []byte(out.String()), 0o644); err != nil {
			return err
		}
		overlay[path] = cp
		pkgs[filepath.Dir(path)] = f.Name.Name
		return nil
	})
	if err != nil {
		return nil, err
	}
	for d, name := range pkgs {
		rel, _ := filepath.Rel(dir, d)
		cp := filepath.Join(tmp, "src", rel, "zz_pathtrace.go")
		if err := os.WriteFile(cp, fmt.Appendf(nil, hook, name), 0o644); err != nil {
			return nil, err
		}
		overlay[filepath.Join(d, "zz_pathtrace.go")] = cp
	}
	return overlay, nil
}

// call is one record of the trace: a call into a function of sdk/pipeline.
type call struct {
	calleeFile, callee, callerFile, caller, g string
	depth                                     int
	leaf                                      bool // it called no other function of sdk/pipeline
}

// report prints, from the trace between its MARK lines, how often each
// file under prefix was entered, all calls counted and leaf calls aside
// (a call that returns without calling another function of sdk/pipeline:
// an accessor, a value's method), and returns the latter by file.
func report(trace, prefix string) (map[string]int, error) {
	f, err := os.Open(trace)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var calls []call
	on := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch line {
		case "MARK begin":
			on = true
			continue
		case "MARK end":
			on = false
			continue
		}
		rec := strings.Split(line, "\t")
		if !on || len(rec) != 6 || !strings.HasPrefix(rec[0], prefix) {
			continue
		}
		depth, _ := strconv.Atoi(rec[5])
		calls = append(calls, call{calleeFile: strings.TrimPrefix(rec[0], prefix), callee: rec[1], callerFile: rec[2], caller: rec[3], g: rec[4], depth: depth, leaf: true})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	// A call is no leaf when the next call of its goroutine is deeper.
	last := map[string]int{}
	for i, c := range calls {
		if j, ok := last[c.g]; ok && c.depth > calls[j].depth {
			calls[j].leaf = false
		}
		last[c.g] = i
	}
	entries, steps, callbacks := map[string]int{}, map[string]int{}, map[string]int{}
	funcs, pkgs := map[string]bool{}, map[string]bool{}
	for _, c := range calls {
		funcs[c.callee] = true
		pkgs[filepath.Dir(c.calleeFile)] = true
		switch {
		case strings.TrimPrefix(c.callerFile, prefix) == c.calleeFile:
		case stdlib(c.caller):
			callbacks[c.calleeFile]++
		default:
			entries[c.calleeFile]++
			if !c.leaf {
				steps[c.calleeFile]++
			}
		}
	}
	files := slices.SortedFunc(maps.Keys(entries), func(a, b string) int {
		return cmp.Or(cmp.Compare(steps[b], steps[a]), cmp.Compare(entries[b], entries[a]), cmp.Compare(a, b))
	})
	fmt.Printf("lane job's path: %d calls into sdk/pipeline, %d functions, %d files entered in %d packages\n", len(calls), len(funcs), len(files), len(pkgs))
	fmt.Printf("%-32s %14s %14s %s\n", "file (sdk/pipeline/)", "entered", "leaves aside", "called back by the standard library")
	for _, name := range files {
		fmt.Printf("%-32s %14d %14d %d\n", name, entries[name], steps[name], callbacks[name])
	}
	for _, name := range slices.Sorted(maps.Keys(callbacks)) {
		if entries[name] == 0 {
			fmt.Printf("%-32s %14d %14d %d\n", name, 0, 0, callbacks[name])
		}
	}
	return steps, nil
}

// stdlib reports whether fn (runtime.Frame.Function) belongs to the
// standard library: its import path's first element has no dot.
func stdlib(fn string) bool {
	if fn == "" {
		return true
	}
	first, _, slash := strings.Cut(fn, "/")
	if !slash {
		first, _, _ = strings.Cut(fn, ".") // "sync.(*WaitGroup).Go.func1"
	}
	return first != "main" && !strings.Contains(first, ".")
}
