package main

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// Every simulation runs a real limiter; it must not leave goroutines behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runVertex runs one command line and returns its exit code and output.
func runVertex(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// csvLines joins lines into the text of a CSV file, one line each.
func csvLines(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func TestSimulateCSV(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{
			// Numaflow's goBackN example: ramps up while fully used, back by one slope
			// after an epoch below the threshold, down while idle.
			name: "goBackN",
			args: []string{"--max", "110", "--min", "10", "--ramp-up", "10s", "--mode", "goBackN",
				"--threshold", "100", "--cool-down", "0s", "--ramp-down", "50", "--format", "csv",
				"--demand", "10,20,20,20,20,20,30,30,30,30,20,20,30,40,50,60,70,,,60,70,80,90,100,110,110"},
			want: csvLines("epoch,pool,granted",
				"1,10,10", "2,20,20", "3,30,20", "4,20,20", "5,30,20", "6,20,20",
				"7,30,30", "8,40,30", "9,30,30", "10,40,30", "11,30,20", "12,20,20",
				"13,30,30", "14,40,40", "15,50,50", "16,60,60", "17,70,70", "18,,", "19,,",
				"20,60,60", "21,70,70", "22,80,80", "23,90,90", "24,100,100", "25,110,110", "26,110,110"),
		},
		{
			name: "scheduled prints the pool in epochs without a call",
			args: []string{"--mode", "scheduled", "--max", "110", "--min", "10", "--ramp-up", "10s",
				"--demand", "10,,,5", "--format", "csv"},
			want: csvLines("epoch,pool,granted", "1,10,10", "2,20,", "3,30,", "4,40,5"),
		},
		{
			// A signal after epoch 3's call cuts epoch 4 to half; one with a
			// Retry-After of 1.5s after epoch 6 pauses epoch 7 until 0.5s into
			// it, and its call comes then.
			name: "throttle signals",
			args: []string{"--max", "100", "--min", "10", "--ramp-up", "9s", "--format", "csv",
				"--demand", "100,100,100,100,100,100,100,100", "--signals", "0,,1,0,0,1500ms"},
			want: csvLines("epoch,pool,granted,signal,cut,paused",
				"1,10,10,0,0,0", "2,20,20,0,0,0", "3,30,30,1,0,0", "4,15,15,0,1,0",
				// Back towards the learnt ceiling of 30, bisecting from the 20
				// that passed; a signal under it at 26.75 falls back to the 24
				// that passed, and the pool climbs to the new hold, 25.
				"5,24.5,24,0,0,0", "6,26.75,26,1,0,0", "7,24,24,0,1,1", "8,25,25,0,0,0"),
		},
		{
			name: "a cut of 20% with --cut",
			args: []string{"--max", "100", "--min", "10", "--ramp-up", "9s", "--format", "csv", "--cut", "20",
				"--demand", "100,100,100", "--signals", "0,1"},
			want: csvLines("epoch,pool,granted,signal,cut,paused", "1,10,10,0,0,0", "2,20,20,1,0,0", "3,16,16,0,1,0"),
		},
		{
			name: "relaxed leaves epochs without a call blank and stalls",
			args: []string{"--max", "110", "--min", "10", "--ramp-up", "10s", "--demand", "5,,5", "--format", "csv"},
			want: csvLines("epoch,pool,granted", "1,10,5", "2,,", "3,20,5"),
		},
		{
			// Slope round_half_up(10*1000/3) = 3333 milli-tokens.
			name: "fractional pools",
			args: []string{"--max", "20", "--min", "10", "--ramp-up", "3s", "--mode", "relaxed",
				"--demand", "1,1,1", "--format", "csv"},
			want: csvLines("epoch,pool,granted", "1,10,1", "2,13.333,1", "3,16.666,1"),
		},
		{
			name: "ramp-up 0 starts at max",
			args: []string{"--max", "100", "--ramp-up", "0s", "--demand", "150,50", "--format", "csv"},
			want: csvLines("epoch,pool,granted", "1,100,100", "2,100,50"),
		},
		{
			name: "demand entries are trimmed",
			args: []string{"--max", "100", "--min", "10", "--ramp-up", "10s", "--demand", " 10 , , 20 ", "--format", "csv"},
			want: csvLines("epoch,pool,granted", "1,10,10", "2,,", "3,19,19"),
		},
		{
			name: "zero demand is a call",
			args: []string{"--max", "100", "--min", "10", "--ramp-up", "10s", "--demand", "0,0", "--format", "csv"},
			want: csvLines("epoch,pool,granted", "1,10,0", "2,19,0"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runVertex(t, append([]string{"simulate"}, tt.args...)...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit code %d, stderr %q; want 0 and nothing", code, stderr)
			}
			if stdout != tt.want {
				t.Fatalf("stdout:\n%s\nwant:\n%s", stdout, tt.want)
			}
		})
	}
}

func TestSimulateTable(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantHeader string
		wantRows   [][]string // fields of each row after the column headers
	}{
		{
			name:       "relaxed, the default format",
			args:       []string{"--max", "20", "--min", "10", "--ramp-up", "3s", "--demand", "1,,1"},
			wantHeader: "mode relaxed, min 10, max 20, ramp-up 3s",
			wantRows:   [][]string{{"1", "10", "1"}, {"2", "-", "-"}, {"3", "13.333", "1"}},
		},
		{
			name:       "scheduled shows the pool without a call",
			args:       []string{"--max", "20", "--min", "10", "--ramp-up", "3s", "--mode", "scheduled", "--demand", "1,,1", "--format", "table"},
			wantHeader: "mode scheduled, min 10, max 20, ramp-up 3s",
			wantRows:   [][]string{{"1", "10", "1"}, {"2", "13.333", "-"}, {"3", "16.666", "1"}},
		},
		{
			name:       "onlyIfUsed names its threshold",
			args:       []string{"--max", "110", "--min", "10", "--ramp-up", "10s", "--mode", "onlyIfUsed", "--demand", "10,,5"},
			wantHeader: "mode onlyIfUsed, min 10, max 110, ramp-up 10s, threshold 50%",
			wantRows:   [][]string{{"1", "10", "10"}, {"2", "-", "-"}, {"3", "20", "5"}},
		},
		{
			name: "goBackN names all its settings",
			args: []string{"--max", "110", "--min", "10", "--ramp-up", "10s", "--mode", "goBackN",
				"--threshold", "100", "--cool-down", "0s", "--ramp-down", "50", "--demand", "10,20,20"},
			wantHeader: "mode goBackN, min 10, max 110, ramp-up 10s, threshold 100%, cool-down 0s, ramp-down 50%",
			wantRows:   [][]string{{"1", "10", "10"}, {"2", "20", "20"}, {"3", "30", "20"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runVertex(t, append([]string{"simulate"}, tt.args...)...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit code %d, stderr %q; want 0 and nothing", code, stderr)
			}
			lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if len(lines) != 2+len(tt.wantRows) {
				t.Fatalf("got %d lines, want a header, column headers and %d rows:\n%s", len(lines), len(tt.wantRows), stdout)
			}
			if lines[0] != tt.wantHeader {
				t.Errorf("header %q, want %q", lines[0], tt.wantHeader)
			}
			if got := strings.Fields(lines[1]); !slices.Equal(got, []string{"epoch", "pool", "granted"}) {
				t.Errorf("column headers %q", lines[1])
			}
			for i, want := range tt.wantRows {
				if got := strings.Fields(lines[2+i]); !slices.Equal(got, want) {
					t.Errorf("row %d = %q, want fields %q", i+1, lines[2+i], want)
				}
			}
			// The columns are right-aligned: every line after the header is as wide.
			for _, l := range lines[2:] {
				if len(l) != len(lines[1]) {
					t.Errorf("row %q is not as wide as the column headers %q", l, lines[1])
				}
			}
		})
	}
}

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

func TestSimulatePlot(t *testing.T) {
	tests := []struct {
		name        string
		args        []string
		wantPool    int // none, legend or acrossChart
		wantGranted int
	}{
		{"relaxed with gaps", []string{"--max", "110", "--min", "10", "--ramp-up", "10s", "--demand", "10,20,,,40,50"}, legend, acrossChart},
		{"scheduled", []string{"--max", "110", "--min", "10", "--ramp-up", "10s", "--mode", "scheduled", "--demand", "10,,,5"}, acrossChart, acrossChart},
		{"csv format", []string{"--max", "20", "--min", "10", "--ramp-up", "3s", "--demand", "1,1,1", "--format", "csv"}, acrossChart, acrossChart},
		{"no calls at all", []string{"--max", "10", "--demand", ",,"}, none, none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ramp.png")
			code, stdout, stderr := runVertex(t, append(append([]string{"simulate"}, tt.args...), "--plot", path)...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit code %d, stderr %q; want 0 and nothing", code, stderr)
			}
			if stdout == "" {
				t.Error("--plot printed nothing to stdout; want the table or CSV as well")
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(b, pngSignature) {
				t.Fatalf("%s does not start with the PNG signature: % x", path, b[:min(len(b), 8)])
			}
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("decode %s: %v", path, err)
			}
			// The legend sits top left; the right half of the chart holds data only.
			all := img.Bounds()
			right := image.Rect(all.Min.X+all.Dx()/2, all.Min.Y, all.Max.X, all.Max.Y)
			for _, c := range []struct {
				series string
				colour color.RGBA
				drawn  bool // in the legend and the chart
				right  bool // also in the right half
			}{
				{"pool", poolColour, tt.wantPool != none, tt.wantPool == acrossChart},
				{"granted", grantedColour, tt.wantGranted != none, tt.wantGranted == acrossChart},
			} {
				n, r := columnsOf(img, all, c.colour), columnsOf(img, right, c.colour)
				switch {
				case !c.drawn && n > 0:
					t.Errorf("%s colour in %d columns; want none: the series has no value", c.series, n)
				case c.drawn && n < minColumns:
					t.Errorf("%s colour in %d columns; want at least %d (legend and chart)", c.series, n, minColumns)
				case c.right && r == 0:
					t.Errorf("%s colour not in the right half of the chart; want its later epochs there", c.series)
				}
			}
		})
	}
}

// Where a series' colour appears on the chart.
const (
	none        = iota // nowhere: the series has no value
	legend             // in the legend, and where the other series does not cover it
	acrossChart        // in the legend and the right half of the chart
)

// minColumns is fewer columns than a series' sample in the legend takes.
const minColumns = 10

// The colours the chart draws the pool and granted series in.
var (
	poolColour    = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	grantedColour = color.RGBA{R: 255, G: 127, B: 14, A: 255}
)

// columnsOf counts the columns of r in img that have a pixel of colour c.
func columnsOf(img image.Image, r image.Rectangle, c color.RGBA) int {
	n := 0
	for x := r.Min.X; x < r.Max.X; x++ {
		for y := r.Min.Y; y < r.Max.Y; y++ {
			if color.RGBAModel.Convert(img.At(x, y)) == c {
				n++
				break
			}
		}
	}
	return n
}

func TestSimulatePlotBadPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "ramp.png")
	code, stdout, stderr := runVertex(t, "simulate", "--max", "10", "--demand", "1,2", "--plot", path)
	if code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if stdout != "" {
		t.Errorf("stdout %q; a bad --plot path must fail before any output", stdout)
	}
	if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Fatalf("stderr %q, want exactly one line", stderr)
	}
	for _, want := range []string{"--plot", path} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q does not contain %q", stderr, want)
		}
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("%s exists", path)
	}
}

func TestSimulateUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string // after "simulate"
		want []string // each must appear in the one line on stderr
	}{
		{"min above max", []string{"--min", "50", "--max", "10", "--demand", "1"}, []string{"--min (50) > --max (10)"}},
		{"missing max", []string{"--demand", "1"}, []string{"--max", "required"}},
		{"missing demand", []string{"--max", "10"}, []string{"--demand", "required"}},
		{"demand not a number", []string{"--max", "10", "--demand", "1,x"}, []string{"--demand", "entry 2", `"x"`}},
		{"demand negative", []string{"--max", "10", "--demand", "1,-3"}, []string{"--demand", "entry 2", `"-3"`}},
		{"demand empty", []string{"--max", "10", "--demand", ""}, []string{"--demand", "at least one epoch"}},
		{"threshold above 100 in any mode", []string{"--max", "10", "--demand", "1", "--threshold", "101"}, []string{"--threshold (101)"}},
		{"demand fractional", []string{"--max", "10", "--demand", "2.5"}, []string{"--demand", "entry 1", `"2.5"`}},
		{"unknown mode", []string{"--max", "10", "--demand", "1", "--mode", "fast"}, []string{"-mode", `"fast"`}},
		{"mode in the wrong case", []string{"--max", "10", "--demand", "1", "--mode", "GoBackN"}, []string{"-mode", `"GoBackN"`}},
		{"unknown format", []string{"--max", "10", "--demand", "1", "--format", "xml"}, []string{"--format", `"xml"`}},
		{"threshold above 100 for onlyIfUsed", []string{"--max", "10", "--demand", "1", "--threshold", "101", "--mode", "onlyIfUsed"}, []string{"--threshold (101)"}},
		{"threshold below 0 for goBackN", []string{"--max", "10", "--demand", "1", "--threshold", "-1", "--mode", "goBackN"}, []string{"--threshold (-1)"}},
		{"ramp-down above 100", []string{"--max", "10", "--demand", "1", "--ramp-down", "101", "--mode", "goBackN"}, []string{"--ramp-down (101)"}},
		{"negative cool-down", []string{"--max", "10", "--demand", "1", "--cool-down", "-1s", "--mode", "goBackN"}, []string{"--cool-down (-1s)"}},
		{"negative ramp-up", []string{"--max", "10", "--demand", "1", "--ramp-up", "-1s"}, []string{"--ramp-up (-1s)"}},
		{"max zero", []string{"--max", "0", "--demand", "1"}, []string{"--max (0)"}},
		{"max not a number", []string{"--max", "abc", "--demand", "1"}, []string{"-max", `"abc"`}},
		{"several config errors on one line", []string{"--max", "0", "--min", "-1", "--demand", "1"}, []string{"--max (0)", "--min (-1)"}},
		{"unknown flag", []string{"--max", "10", "--demand", "1", "--bogus"}, []string{"-bogus"}},
		{"flag without a value", []string{"--demand", "1", "--max"}, []string{"-max"}},
		{"stray argument", []string{"--max", "10", "--demand", "1", "extra"}, []string{`"extra"`}},
		{"signal not 0, 1 or a duration", []string{"--max", "10", "--demand", "1", "--signals", "0,2"}, []string{"--signals", "entry 2", `"2"`}},
		{"signal with a negative Retry-After", []string{"--max", "10", "--demand", "1", "--signals", "-1s"}, []string{"--signals", "entry 1", `"-1s"`}},
		{"cut above 100", []string{"--max", "10", "--demand", "1", "--signals", "1", "--cut", "101"}, []string{"--cut (101)"}},
		{"quota of no kind", []string{"--max", "10", "--demand", "1", "--quota", "window:5"}, []string{"--quota", `"window:5"`, "fixed:RATE or bucket:RATE:BURST"}},
		{"quota not a number", []string{"--max", "10", "--demand", "1", "--quota", "fixed:lots"}, []string{"--quota", `"lots"`}},
		{"bucket without a burst", []string{"--max", "10", "--demand", "1", "--quota", "bucket:150"}, []string{"--quota", `"bucket:150"`}},
		{"bucket with a burst of 0", []string{"--max", "10", "--demand", "1", "--quota", "bucket:150:0"}, []string{"--quota", "burst"}},
		{"quota change outside the demand", []string{"--max", "10", "--demand", "1x5", "--quota", "fixed:5", "--quota-change", "9:3"}, []string{"--quota change", `"9:3"`, "from 2 to 5"}},
		{"quota changes out of order", []string{"--max", "10", "--demand", "1x5", "--quota", "fixed:5", "--quota-change", "4:3", "--quota-change", "3:2"}, []string{"--quota change", `"3:2"`, "not after"}},
		{"quota change without quota", []string{"--max", "10", "--demand", "1", "--quota-change", "2:3"}, []string{"--quota-change", "for --quota"}},
		{"negative retry-after", []string{"--max", "10", "--demand", "1", "--quota", "fixed:5", "--retry-after", "-1s"}, []string{"retry-after (-1s)"}},
		{"demand repeated zero times", []string{"--max", "10", "--demand", "5x0"}, []string{"--demand", "entry 1", `"5x0"`}},
		{"hold-below above 100", []string{"--max", "10", "--demand", "1", "--quota", "fixed:5", "--hold-below", "101"}, []string{"--hold-below (101)"}},
		{"negative probe-after", []string{"--max", "10", "--demand", "1", "--quota", "fixed:5", "--probe-after", "-1s"}, []string{"--probe-after (-1s)"}},
		{"autoscale without a replica rate", []string{"--max", "10", "--demand", "1", "--autoscale"}, []string{"--replica-rate (0)"}},
		{"autoscale with scale-min above scale-max", []string{"--max", "10", "--demand", "1", "--autoscale", "--replica-rate", "5", "--scale-min", "3", "--scale-max", "2"}, []string{"--scale-min (3)", "max (2)"}},
		{"autoscale with a lookback of 0", []string{"--max", "10", "--demand", "1", "--autoscale", "--replica-rate", "5", "--lookback", "0"}, []string{"--lookback (0)"}},
		{"autoscale with a quota", []string{"--max", "10", "--demand", "1", "--autoscale", "--replica-rate", "5", "--quota", "fixed:5"}, []string{"--quota is not for --autoscale"}},
		{"a scale flag without autoscale", []string{"--max", "10", "--demand", "1", "--scale-max", "5"}, []string{"--scale-max is for --autoscale"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runVertex(t, append([]string{"simulate"}, tt.args...)...)
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") {
				t.Fatalf("stderr %q, want exactly one line", stderr)
			}
			if !strings.HasPrefix(stderr, "vertex: simulate: ") {
				t.Errorf("stderr %q does not start with %q", stderr, "vertex: simulate: ")
			}
			for _, want := range tt.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not contain %q", stderr, want)
				}
			}
		})
	}
}

func TestRunCommandErrors(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		firstLine string // the first line on stderr
	}{
		{"no command", nil, "usage: vertex <command> [flags]"},
		{"unknown command", []string{"frobnicate", "--max", "10"}, `vertex: unknown command "frobnicate" (commands: run, processor, monitor, validate, simulate, scaler, serve, bench, isb, version; see 'vertex help')`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runVertex(t, tt.args...)
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			if first, _, _ := strings.Cut(stderr, "\n"); first != tt.firstLine {
				t.Errorf("first line on stderr %q, want %q", first, tt.firstLine)
			}
			if !strings.Contains(stderr, "simulate") {
				t.Errorf("stderr %q does not list the commands", stderr)
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // each must appear on stdout
	}{
		{"simulate -h", []string{"simulate", "-h"}, []string{"usage: vertex simulate", "-max", "-demand", "-mode", "-format", "-plot"}},
		{"simulate --help", []string{"simulate", "--help"}, []string{"usage: vertex simulate"}},
		{"simulate -h after flags", []string{"simulate", "--max", "10", "-h"}, []string{"usage: vertex simulate"}},
		{"top-level -h", []string{"-h"}, []string{"usage: vertex <command>", "simulate"}},
		{"top-level help", []string{"help"}, []string{"usage: vertex <command>", "simulate", "scaler", "serve"}},
		{"serve -h", []string{"serve", "-h"}, []string{"usage: vertex serve", "-role", "-uds-dir", "-forward", "-addr"}},
		{"scaler -h", []string{"scaler", "-h"}, []string{"usage: vertex scaler", "-status", "-replica-rate", "-addr", "-socket", "-interval"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runVertex(t, tt.args...)
			if code != 0 {
				t.Errorf("exit code %d, want 0", code)
			}
			if stderr != "" {
				t.Errorf("stderr %q, want nothing", stderr)
			}
			for _, want := range tt.want {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout does not contain %q:\n%s", want, stdout)
				}
			}
		})
	}
}

func TestSimulateFromFile(t *testing.T) {
	// config/examples/monovertex.yaml: max 20, min 5, rampUpDuration 5s, relaxed.
	code, stdout, stderr := runVertex(t, "simulate", "-f", "../../config/examples/monovertex.yaml",
		"--demand", "100,100,100,100,100,100,100", "--format", "csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want := "epoch,pool,granted\n1,5,5\n2,8,8\n3,11,11\n4,14,14\n5,17,17\n6,20,20\n7,20,20\n"
	if stdout != want {
		t.Fatalf("got\n%s\nwant\n%s", stdout, want)
	}
	// A flag beside -f overrides the file's field.
	code, stdout, _ = runVertex(t, "simulate", "-f", "../../config/examples/monovertex.yaml",
		"--max", "8", "--demand", "100,100,100", "--format", "csv")
	if code != 0 || stdout != "epoch,pool,granted\n1,5,5\n2,5.6,5\n3,6.2,6\n" {
		t.Fatalf("with --max 8: exit %d\n%s", code, stdout)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-f", "/nonexistent.yaml"}, "/nonexistent.yaml"},
		{[]string{"-f", "../../config/examples/transformer.yaml"}, "has no rateLimit"},
		{[]string{"-f", "../../config/examples/pipeline.yaml", "--vertex", "nope"}, `no vertex "nope"`},
	} {
		code, _, stderr := runVertex(t, append(append([]string{"simulate"}, tt.args...), "--demand", "1")...)
		if code != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
	// A pipeline vertex's rate limit is its own, merged with the pipeline's.
	code, stdout, _ = runVertex(t, "simulate", "-f", "../../config/examples/pipeline.yaml", "--vertex", "even",
		"--demand", "1000,1000", "--format", "csv")
	if code != 0 || stdout != "epoch,pool,granted\n1,20,20\n2,26,26\n" {
		t.Fatalf("pipeline vertex: exit %d\n%s", code, stdout)
	}
}

// TestSimulateChange replays live changes of a config file: the switching
// epoch keeps the pool it had under the smaller max, and the new ramp goes
// on from it; changes that cannot be made live, or at no epoch of the
// demand, are usage errors that name the flag.
func TestSimulateChange(t *testing.T) {
	dir := t.TempDir()
	write := func(name, rateLimit string) string {
		path := filepath.Join(dir, name)
		yaml := "apiVersion: numaflow.numaproj.io/v1alpha1\nkind: MonoVertex\nmetadata:\n  name: sim\nspec:\n  limits:\n    rateLimit:\n" +
			rateLimit + "  source:\n    generator:\n      rpu: 10\n  sink:\n    log: {}\n"
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	base := write("base.yaml", "      max: 300\n      min: 100\n      rampUpDuration: 2s\n")
	up := write("up.yaml", "      max: 600\n      min: 100\n      rampUpDuration: 2s\n")
	down := write("down.yaml", "      max: 150\n      min: 150\n      rampUpDuration: 0s\n")
	paced := write("paced.yaml", "      max: 300\n      pacing: 100ms\n")
	code, stdout, stderr := runVertex(t, "simulate", "-f", base, "--format", "csv",
		"--demand", "1000,1000,1000,1000,1000,1000,1000,1000", "--change", "4:"+up, "--change", "7:"+down)
	want := csvLines("epoch,pool,granted,max,switched",
		"1,100,100,300,0", "2,200,200,300,0", "3,300,300,300,0", "4,300,300,600,1",
		"5,550,550,600,0", "6,600,600,600,0", "7,150,150,150,1", "8,150,150,150,0")
	if code != 0 || stdout != want {
		t.Fatalf("exit %d %s\n got\n%s\nwant\n%s", code, stderr, stdout, want)
	}
	for _, tt := range []struct {
		change, want string
	}{
		{"2:" + paced, "pacing (100ms, was 0s) cannot change while a replica runs"},
		{"1:" + up, "epoch 1 is not from 2 to 3"},
		{"4:" + up, "epoch 4 is not from 2 to 3"},
		{up, "want K:FILE"},
		{"2:/nonexistent.yaml", "/nonexistent.yaml"},
	} {
		code, _, stderr := runVertex(t, "simulate", "-f", base, "--demand", "1,1,1", "--change", tt.change)
		if code != 2 || !strings.Contains(stderr, "--change") || !strings.Contains(stderr, tt.want) {
			t.Errorf("--change %s: exit %d, %q; want 2 and %q", tt.change, code, stderr, tt.want)
		}
	}
}

// TestSimulateQuota replays the measured fixed window of 150 a second, which
// drops to 75 at epoch 21 and rises back at epoch 41, against max 400, min
// 20, a ramp of 10s and a cut of 20%: the table shows what the downstream
// accepted and refused per epoch and in all, the limit holds just below
// each quota, and finds the higher one again when it probes, fifteen
// epochs after its last cut.
func TestSimulateQuota(t *testing.T) {
	code, stdout, stderr := runVertex(t, "simulate", "--max", "400", "--min", "20", "--ramp-up", "10s", "--cut", "20",
		"--demand", "1000x70", "--quota", "fixed:150", "--retry-after", "1s", "--quota-change", "21:75", "--quota-change", "41:150")
	if code != 0 {
		t.Fatalf("exit code %d; stderr %s", code, stderr)
	}
	lines := strings.Split(stdout, "\n")
	if !strings.Contains(lines[1], "accepted") || !strings.Contains(lines[1], "refused") {
		t.Fatalf("header %q; want accepted and refused columns", lines[1])
	}
	for _, want := range []string{
		"     20   151      151       150        1      signal",
		"     21   150      150        75       75  cut signal",
		"     22    75       75        75        0         cut",
		"     42    76       76        76        0",
		"     43   150      150       150        0",
		"     70   150      150       150        0",
		"accepted 8546, refused 117 (1.35% of those sent)",
	} {
		if !strings.Contains(stdout, want+"\n") && !strings.Contains(stdout, want+" ") {
			t.Errorf("no line %q in\n%s", want, stdout)
		}
	}
	code, stdout, _ = runVertex(t, "simulate", "--max", "400", "--min", "20", "--ramp-up", "10s", "--cut", "20",
		"--demand", "1000x3", "--quota", "bucket:150:50", "--format", "csv")
	if want := csvLines("epoch,pool,granted,accepted,refused,signal,cut,paused",
		"1,20,20,20,0,0,0,0", "2,58,58,50,8,1,0,0", "3,46,46,46,0,0,1,0"); code != 0 || stdout != want {
		t.Errorf("bucket: exit %d, CSV\n%s\nwant\n%s", code, stdout, want)
	}
}

// TestSimulateGroup runs the two members of config/examples/shared-limit.yaml
// and refuses what cannot run, each with exit code 2 and one line naming the
// flag.
func TestSimulateGroup(t *testing.T) {
	file := "../../config/examples/shared-limit.yaml"
	code, out, errOut := runVertex(t, "simulate", "--group", "partner-api", "-f", file,
		"--demand-of", "orders=80,80,80,80,80,80", "--demand-of", "refunds=,,,,80,80")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 8 || !strings.Contains(lines[1], "orders  refunds  sum") {
		t.Fatalf("output:\n%s", out)
	}
	for _, want := range []string{"      3         100      80        0   80", "      6         100      50       50  100"} {
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--group", "partner-api", "--demand-of", "orders=1"}, "--group needs -f PIPELINE"},
		{[]string{"--demand-of", "orders=1", "-f", file}, "--demand-of needs --group NAME"},
		{[]string{"--group", "nope", "-f", file, "--demand-of", "orders=1"}, `--group ("nope"): no vertex`},
		{[]string{"--group", "partner-api", "-f", file, "--demand-of", "payments=1"}, `--demand-of ("payments=1"): want VERTEX=LIST, VERTEX one of orders, refunds`},
		{[]string{"--group", "partner-api", "-f", file, "--demand-of", "orders=x"}, `--demand-of ("orders=x")`},
		{[]string{"--group", "partner-api", "-f", file}, "needs --demand-of VERTEX=LIST"},
		{[]string{"--group", "partner-api", "-f", "../../config/examples/bench.yaml", "--demand-of", "a=1"}, "is a MonoVertex"},
	} {
		code, _, errOut := runVertex(t, append([]string{"simulate"}, tt.args...)...)
		if code != 2 || !strings.Contains(errOut, tt.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
			t.Errorf("simulate %v: exit %d, %q; want 2 and one line with %q", tt.args, code, errOut, tt.want)
		}
	}
}

func TestSimulateAutoscale(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "scaled.png")
	code, stdout, stderr := runVertex(t, "simulate", "--autoscale", "--max", "1000", "--min", "10", "--ramp-up", "60s",
		"--demand", "1500x90", "--replica-rate", "200", "--scale-min", "1", "--lookback", "1",
		"--scale-up-cooldown", "0", "--scale-down-cooldown", "0", "--format", "csv", "--plot", plot)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 91 || lines[0] != "epoch,demand,pool,processed,backlog,replicas,fits,next,reason,throttled,cut,paused" ||
		lines[90] != "90,1500,1000,1000,75218,5,5,5,atLimit,0,0,0" {
		t.Fatalf("csv: %d lines, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}
	data, err := os.ReadFile(plot)
	if err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Fatalf("plot: %v, %d bytes", err, len(data))
	}
}
