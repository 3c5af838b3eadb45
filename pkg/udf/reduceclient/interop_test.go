package reduceclient_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/internal/serverinfo"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/udf"
	"github.com/sluiceflow/sluice/pkg/udf/reduceclient"
)

// EnvNumaflowGo names a directory holding the source of numaflow-go (Numaflow's
// Go SDK), whose reduce examples the interop tests build and run.
const EnvNumaflowGo = "NUMAFLOW_GO_DIR"

// serveMain starts a numaflow-go example's function with numaflow-go's own
// server, listening in the directory REDUCE_DIR rather than in
// /var/run/numaflow: %[1]s is numaflow-go's package of the server, %[2]s the
// example's creator, %[3]q and %[4]q the socket and server-info file names.
const serveMain = `package main

import (
	"context"
	"log"
	"os"
	"path/filepath"

	"github.com/numaproj/numaflow-go/pkg/%[1]s"
)

func main() {
	dir := os.Getenv("REDUCE_DIR")
	err := %[1]s.NewServer(%[2]s,
		%[1]s.WithSockAddr(filepath.Join(dir, %[3]q)),
		%[1]s.WithServerInfoFilePath(filepath.Join(dir, %[4]q))).Start(context.Background())
	if err != nil {
		log.Fatal(err)
	}
}
`

// buildNumaflowExample builds numaflow-go's example in examples/<example> of
// the source tree EnvNumaflowGo names, as it is but for its main, which is
// renamed: the program runs the example's function, made by the expression
// creator, with numaflow-go's server of package pkg, on the socket and
// server-info file of kind in REDUCE_DIR. It skips the test, with one line
// saying why, when no source tree is given.
func buildNumaflowExample(t *testing.T, example, pkg, creator string, kind udf.Kind) string {
	t.Helper()
	src := os.Getenv(EnvNumaflowGo)
	exampleDir := filepath.Join(src, "examples", example)
	if src == "" {
		t.Skipf("%s is not set: numaflow-go's %s example is not run (set it to a numaflow-go source tree)", EnvNumaflowGo, example)
	}
	if _, err := os.Stat(filepath.Join(exampleDir, "main.go")); err != nil {
		t.Skipf("%s=%s holds no examples/%s/main.go: numaflow-go's %s example is not run", EnvNumaflowGo, src, example, example)
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build numaflow-go's example with")
	}
	src, err = filepath.Abs(src)
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(exampleDir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(mod, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	main := read("main.go")
	if !bytes.Contains(main, []byte("\nfunc main() {")) {
		t.Fatalf("numaflow-go's %s example has no func main", example)
	}
	write("example.go", bytes.Replace(main, []byte("\nfunc main() {"), []byte("\nfunc exampleMain() {"), 1))
	write("serve.go", []byte(fmt.Sprintf(serveMain, pkg, creator, kind.Socket(), kind.InfoFile())))
	replace := regexp.MustCompile(`(?m)^replace github.com/numaproj/numaflow-go => .*$`)
	gomod := read("go.mod")
	if !replace.Match(gomod) {
		t.Fatalf("numaflow-go's %s example's go.mod has no replace of numaflow-go", example)
	}
	write("go.mod", replace.ReplaceAll(gomod, []byte("replace github.com/numaproj/numaflow-go => "+src)))
	write("go.sum", read("go.sum"))

	bin := filepath.Join(t.TempDir(), "example")
	cmd := exec.Command(goCmd, "build", "-o", bin, ".")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building numaflow-go's %s example: %v\n%s", example, err, out)
	}
	return bin
}

// runExample runs bin with its socket directory dir until the test ends,
// when it gets SIGTERM.
func runExample(t *testing.T, bin, dir string) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "REDUCE_DIR="+dir)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Error(err)
		}
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("numaflow-go's example did not stop within 10s of SIGTERM\n%s", stderr.String())
		}
	})
}

// numaflow-go's reducer counter example, run by numaflow-go's own reduce
// server, counts the messages of a window per keys for sluice's client, in
// window after window on one connection.
func TestNumaflowGoReducerCounter(t *testing.T) {
	bin := buildNumaflowExample(t, "reducer/counter", "reducer", "reducer.SimpleCreatorWithReduceFn(reduceCounter)", serverinfo.KindReduce)
	dir := socketDir(t)
	runExample(t, bin, dir)
	c := client(t, dir, serverinfo.KindReduce)
	for i := range 3 {
		start := time.UnixMilli(int64(i) * 60_000)
		w := reduceclient.Window{Start: start, End: start.Add(time.Minute)}
		in := append(messages([]string{"even"}, "2", "4", "6"), messages([]string{"odd"}, "1", "3")...)
		in = append(in, reduceclient.Message{Message: isb.Message{Keys: []string{"even"}, Value: []byte("8"), EventTime: start}})
		out, err := c.Reduce(testContext(t), w, in)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range out {
			if r.Window.Start != w.Start || !r.EventTime.Equal(w.End.Add(-time.Millisecond)) {
				t.Errorf("result %+v of window %v", r, w)
			}
			got = append(got, describe(r))
		}
		slices.Sort(got)
		end := strconv.FormatInt(w.End.UnixMilli()-1, 10)
		if want := []string{"even=4 @" + end, "odd=2 @" + end}; !slices.Equal(got, want) {
			t.Errorf("window %d: results %q, want %q", i, got, want)
		}
	}
}

// numaflow-go's reduce-streamer counter example, which sends a count every
// ten messages, answers sluice's client before the window ends.
func TestNumaflowGoReduceStreamerCounter(t *testing.T) {
	bin := buildNumaflowExample(t, "reducestreamer/counter", "reducestreamer",
		"reducestreamer.SimpleCreatorWithReduceStreamFn(reduceCounter)", serverinfo.KindReduceStream)
	dir := socketDir(t)
	runExample(t, bin, dir)
	c := client(t, dir, serverinfo.KindReduceStream)
	w := reduceclient.Window{Start: time.UnixMilli(0), End: time.UnixMilli(10_000)}
	s, err := c.Open(testContext(t), w)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, m := range messages([]string{"k"}, "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11") {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := s.Recv(); err != nil || describe(r) != "k=10 @9999" {
		t.Fatalf("Recv before the window ends = %q, %v", describe(r), err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Recv(); err != nil || describe(r) != "k=2 @9999" {
		t.Fatalf("Recv at the end = %q, %v", describe(r), err)
	}
	if _, err := s.Recv(); err == nil {
		t.Fatal("a result after the last, want io.EOF")
	}
}

// numaflow-go's reducer sum example adds up the integers of a window per
// keys, leaving out what is not one.
func TestNumaflowGoReducerSum(t *testing.T) {
	bin := buildNumaflowExample(t, "reducer/sum", "reducer", "&SumReducerCreator{}", serverinfo.KindReduce)
	dir := socketDir(t)
	runExample(t, bin, dir)
	c := client(t, dir, serverinfo.KindReduce)
	w := reduceclient.Window{Start: time.UnixMilli(60_000), End: time.UnixMilli(120_000)}
	in := append(messages([]string{"a"}, "1", "2", "x", "39"), messages([]string{"b"}, "-5")...)
	out, err := c.Reduce(testContext(t), w, in)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range out {
		got = append(got, describe(r))
	}
	slices.Sort(got)
	if want := []string{"a=42 @119999", "b=-5 @119999"}; !slices.Equal(got, want) {
		t.Errorf("results %q, want %q", got, want)
	}
}
