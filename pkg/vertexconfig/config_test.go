package vertexconfig

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluiceflow/sluice/config"

	"github.com/sluiceflow/sluice/pkg/connectors/source"
	"github.com/sluiceflow/sluice/pkg/isb"
	"github.com/sluiceflow/sluice/pkg/isb/jetstream"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/ratelimit/share"
)

// A corpus file states what it expects in its leading comment lines:
//
//	# want: <a substring of one problem's String()>   (one line per problem)
//	# skip: <the known bug that keeps the file from meeting its wants>
//
// The other leading comment lines describe the case. A file marked skip that
// meets its wants fails, so that the mark is removed once the bug is fixed.
type corpusCase struct {
	path  string
	data  []byte
	wants []string
	skip  string
}

func readCase(t *testing.T, path string) corpusCase {
	t.Helper()
	data, err := readFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := corpusCase{path: path, data: data}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "#") {
			break
		}
		text := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if want, ok := strings.CutPrefix(text, "want:"); ok {
			c.wants = append(c.wants, strings.TrimSpace(want))
		} else if skip, ok := strings.CutPrefix(text, "skip:"); ok {
			c.skip = strings.TrimSpace(skip)
		}
	}
	return c
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }

// corpus returns the files matching pattern, failing when there are fewer than
// least.
func corpus(t *testing.T, least int, patterns ...string) []string {
	t.Helper()
	var files []string
	for _, p := range patterns {
		m, err := filepath.Glob(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < least {
		t.Fatalf("%v: %d files, want at least %d", patterns, len(files), least)
	}
	return files
}

// problemsOf returns the problems of a Parse or Load error.
func problemsOf(t *testing.T, f *config.File, err error) []config.Problem {
	t.Helper()
	if err == nil {
		t.Fatalf("loaded without error (kind %s)", f.Kind)
	}
	if f != nil {
		t.Errorf("returned a file beside the error")
	}
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("error is %T, not *config.Error: %v", err, err)
	}
	if len(ce.Problems) == 0 {
		t.Fatalf("*config.Error without problems")
	}
	return ce.Problems
}

// mismatch pairs each want with a distinct problem whose String() contains it,
// and describes what could not be paired; nil means the problems are exactly the
// wanted ones.
func mismatch(wants []string, problems []config.Problem) []string {
	strs := make([]string, len(problems))
	for i, p := range problems {
		strs[i] = p.String()
	}
	owner := make([]int, len(strs)) // problem -> want index+1
	var try func(w int, seen []bool) bool
	try = func(w int, seen []bool) bool {
		for i, s := range strs {
			if seen[i] || !strings.Contains(s, wants[w]) {
				continue
			}
			seen[i] = true
			if owner[i] == 0 || try(owner[i]-1, seen) {
				owner[i] = w + 1
				return true
			}
		}
		return false
	}
	var out []string
	for w := range wants {
		if !try(w, make([]bool, len(strs))) {
			out = append(out, "no problem matches want: "+wants[w])
		}
	}
	for i, s := range strs {
		if owner[i] == 0 {
			out = append(out, "unwanted problem: "+s)
		}
	}
	if len(out) > 0 {
		out = append(out, "all problems:")
		for _, s := range strs {
			out = append(out, "    "+s)
		}
	}
	return out
}

func sortedByLine(problems []config.Problem) bool {
	return slices.IsSortedFunc(problems, func(a, b config.Problem) int { return a.Line - b.Line })
}

func TestBadConfigs(t *testing.T) {
	for _, path := range corpus(t, 35, "../../config/testdata/bad/*.yaml") {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			c := readCase(t, path)
			if len(c.wants) == 0 {
				t.Fatal("the file has no '# want:' line")
			}
			f, err := Parse(c.data)
			var diff []string
			var ce *config.Error
			switch {
			case err == nil:
				diff = []string{"loaded without error (kind " + f.Kind + ")"}
			case !errors.As(err, &ce):
				t.Fatalf("error is %T, not *config.Error: %v", err, err)
			default:
				if f != nil {
					t.Error("returned a file beside the error")
				}
				if !sortedByLine(ce.Problems) {
					t.Errorf("problems are not sorted by line: %v", ce.Problems)
				}
				diff = mismatch(c.wants, ce.Problems)
			}
			switch {
			case c.skip != "" && len(diff) > 0:
				t.Skipf("known bug: %s\n%s", c.skip, strings.Join(diff, "\n"))
			case c.skip != "":
				t.Errorf("the problems are now exactly the wanted ones; remove the '# skip:' line (%s)", c.skip)
			case len(diff) > 0:
				t.Errorf("%s:\n%s", path, strings.Join(diff, "\n"))
			}
		})
	}
}

// goodFiles are the corpus of good configs, the examples shipped with sluice
// and Numaflow's reduce pipelines that sluice runs.
func goodFiles(t *testing.T) []string {
	t.Helper()
	good := corpus(t, 6, "../../config/testdata/good/*.yaml")
	examples := corpus(t, 1, "../../config/examples/*.yaml")
	reduce := corpus(t, 14, "../../config/testdata/numaflow/reduce/example-*.yaml", "../../config/testdata/numaflow/reduce/e2e-*.yaml")
	return slices.Concat(good, examples, reduce)
}

func TestGoodConfigs(t *testing.T) {
	for _, path := range goodFiles(t) {
		t.Run(filepath.Base(filepath.Dir(path))+"/"+strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			c := readCase(t, path)
			if len(c.wants) > 0 {
				t.Fatal("a good config has '# want:' lines")
			}
			f, err := Load(path)
			switch {
			case c.skip != "" && err != nil:
				t.Skipf("known bug: %s\n%v", c.skip, err)
			case c.skip != "":
				t.Fatalf("loads now; remove the '# skip:' line (%s)", c.skip)
			case err != nil:
				t.Fatalf("does not load:\n%v", err)
			}
			switch f.Kind {
			case config.KindMonoVertex:
				if f.MonoVertex == nil || f.Pipeline != nil {
					t.Errorf("kind %s: MonoVertex %v, Pipeline %v", f.Kind, f.MonoVertex != nil, f.Pipeline != nil)
				}
			case config.KindPipeline:
				if f.Pipeline == nil || f.MonoVertex != nil {
					t.Errorf("kind %s: MonoVertex %v, Pipeline %v", f.Kind, f.MonoVertex != nil, f.Pipeline != nil)
				}
			default:
				t.Errorf("kind %q", f.Kind)
			}
			if f.Name() == "" {
				t.Error("Name() is empty")
			}
		})
	}
}

// TestParseConcurrently parses every good config from many goroutines at once, for
// the race detector.
func TestParseConcurrently(t *testing.T) {
	var data [][]byte
	for _, path := range goodFiles(t) {
		if c := readCase(t, path); c.skip == "" {
			data = append(data, c.data)
		}
	}
	var wg sync.WaitGroup
	for range 8 {
		for _, d := range data {
			wg.Go(func() {
				if _, err := Parse(d); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
}

func mustLoad(t *testing.T, path string) *config.File {
	t.Helper()
	f, err := Load(path)
	if err != nil {
		t.Fatalf("%s does not load:\n%v", path, err)
	}
	return f
}

func mustParse(t *testing.T, yaml string) *config.File {
	t.Helper()
	f, err := Parse([]byte(yaml))
	if err != nil {
		t.Fatalf("does not parse:\n%v\n%s", err, yaml)
	}
	return f
}

func TestIgnoredFields(t *testing.T) {
	t.Run("monovertex", func(t *testing.T) {
		f := mustLoad(t, "../../config/testdata/good/monovertex-kubernetes.yaml")
		// Every Kubernetes-only field of MonoVertexSpec, its inlined pod template,
		// and the http source's service.
		want := []string{
			"spec.source.http.service",
			"spec.metadata", "spec.nodeSelector", "spec.tolerations", "spec.securityContext",
			"spec.imagePullSecrets", "spec.priorityClassName", "spec.priority", "spec.affinity",
			"spec.serviceAccountName", "spec.runtimeClassName", "spec.automountServiceAccountToken",
			"spec.dnsPolicy", "spec.dnsConfig", "spec.resourceClaims",
			"spec.containerTemplate", "spec.daemonTemplate", "spec.volumes",
			"spec.initContainers", "spec.sidecars", "spec.updateStrategy", "spec.lifecycle",
		}
		checkIgnored(t, f.Ignored, want)
		// Every pod template field is among them.
		pt := reflect.TypeFor[config.PodTemplate]()
		for i := range pt.NumField() {
			name, _, _ := strings.Cut(pt.Field(i).Tag.Get("yaml"), ",")
			if !slices.Contains(f.Ignored, "spec."+name) {
				t.Errorf("pod template field %s is not set in the file", name)
			}
		}
		// The dataflow fields beside them are loaded.
		s := f.MonoVertex.Spec
		if s.Replicas == nil || *s.Replicas != 2 {
			t.Errorf("replicas = %v, want 2", s.Replicas)
		}
		if h := s.Source.HTTP; h == nil || h.Ports == nil || *h.Ports.HTTPS != 8443 || *h.Ports.HTTP != 8090 ||
			h.Auth.Token.Name != "orders-ingest-http" || h.Auth.Token.Key != "token" {
			t.Errorf("http source = %+v", h)
		}
		if got := s.Limits.GetReadBatchSize(); got != 200 {
			t.Errorf("readBatchSize = %d, want 200", got)
		}
		if got := s.Limits.GetReadTimeout(); got != 500*time.Millisecond {
			t.Errorf("readTimeout = %v, want 500ms", got)
		}
		if s.Limits.Concurrency == nil || *s.Limits.Concurrency != 400 {
			t.Errorf("concurrency = %v, want 400", s.Limits.Concurrency)
		}
		m := f.MonoVertex.Metadata
		if m.Namespace != "payments" || m.Labels["app.kubernetes.io/part-of"] != "payments" ||
			m.Annotations["numaflow.numaproj.io/instance"] != "prod" {
			t.Errorf("metadata = %+v", m)
		}
	})
	t.Run("pipeline", func(t *testing.T) {
		f := mustLoad(t, "../../config/testdata/good/pipeline.yaml")
		checkIgnored(t, f.Ignored, []string{
			"spec.lifecycle", "spec.interStepBuffer", "spec.templates",
			"spec.vertices[1].containerTemplate",
		})
	})
	t.Run("none", func(t *testing.T) {
		f := mustLoad(t, "../../config/examples/monovertex.yaml")
		if len(f.Ignored) != 0 {
			t.Errorf("Ignored = %q, want none", f.Ignored)
		}
	})
}

func checkIgnored(t *testing.T, got, want []string) {
	t.Helper()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		var missing, extra []string
		for _, p := range w {
			if !slices.Contains(g, p) {
				missing = append(missing, p)
			}
		}
		for _, p := range g {
			if !slices.Contains(w, p) {
				extra = append(extra, p)
			}
		}
		t.Errorf("Ignored: missing %q, unexpected %q", missing, extra)
	}
}

const minimalMonoVertex = `apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata:
  name: orders
spec:
  source:
    generator: {}
  sink:
    log: {}
`

func TestDefaults(t *testing.T) {
	var nilLimits *config.Limits
	if got := nilLimits.GetReadBatchSize(); got != 500 {
		t.Errorf("nil GetReadBatchSize() = %d, want 500", got)
	}
	if got := nilLimits.GetReadTimeout(); got != time.Second {
		t.Errorf("nil GetReadTimeout() = %v, want 1s", got)
	}
	if got := nilLimits.GetRateLimit(); got != nil {
		t.Errorf("nil GetRateLimit() = %+v, want nil", got)
	}
	if got := nilLimits.GetUDFTimeout(); got != time.Minute {
		t.Errorf("nil GetUDFTimeout() = %v, want 1m", got)
	}

	for name, limits := range map[string]string{
		"no limits":    "",
		"empty limits": "  limits: {}\n",
		"null limits":  "  limits:\n",
	} {
		t.Run(name, func(t *testing.T) {
			f := mustParse(t, minimalMonoVertex+limits)
			l := f.MonoVertex.Spec.Limits
			if got := l.GetReadBatchSize(); got != 500 {
				t.Errorf("GetReadBatchSize() = %d, want 500", got)
			}
			if got := l.GetReadTimeout(); got != time.Second {
				t.Errorf("GetReadTimeout() = %v, want 1s", got)
			}
			if got := l.GetUDFTimeout(); got != time.Minute {
				t.Errorf("GetUDFTimeout() = %v, want 1m", got)
			}
			if got := l.GetRateLimit(); got != nil {
				t.Errorf("GetRateLimit() = %+v, want nil", got)
			}
		})
	}

	t.Run("rateLimit", func(t *testing.T) {
		f := mustParse(t, minimalMonoVertex+"  limits:\n    rateLimit:\n      max: 100\n")
		r := f.MonoVertex.Spec.Limits.GetRateLimit()
		if r == nil {
			t.Fatal("GetRateLimit() = nil")
		}
		got := LimiterConfig(r)
		want := ratelimit.Config{
			Max:                 100,
			Min:                 1,
			RampUpDuration:      time.Second,
			Mode:                ratelimit.Relaxed,
			ThresholdPercentage: 50,
			CoolDownPeriod:      5 * time.Second,
			RampDownPercentage:  50,
			CutPercentage:       50, // used only with adaptive
			HoldBelowPercentage: 1,
			ProbeAfter:          2 * time.Second,
			ForgetAfter:         time.Minute,
		}
		if got != want {
			t.Errorf("LimiterConfig() = %+v, want %+v", got, want)
		}
		if got != ratelimit.DefaultConfig(100) {
			t.Errorf("LimiterConfig() = %+v, want DefaultConfig(100) %+v", got, ratelimit.DefaultConfig(100))
		}
		// sluice's additions are left unset; their defaults are the package's
		// constants.
		if r.ExcludeDropped != nil || r.StaleAfter != nil || r.SyncInterval != nil || r.OnStoreFailure != nil ||
			r.Pacing != nil || r.TTL != nil || r.ResumedRampUp != nil || r.Store != nil || r.Modes != nil {
			t.Errorf("unset fields are set: %+v", r)
		}
		if ratelimit.DefaultMin != 1 || ratelimit.DefaultRampUpDuration != time.Second || share.DefaultTTL != 180*time.Second ||
			ratelimit.DefaultStaleAfter != 2*time.Second || ratelimit.DefaultSyncInterval != 100*time.Millisecond {
			t.Error("rateLimit defaults changed")
		}
	})

	t.Run("pipeline", func(t *testing.T) {
		f := mustLoad(t, "../../config/testdata/good/pipeline.yaml")
		s := f.Pipeline.Spec
		if got := s.Limits.GetReadBatchSize(); got != 200 {
			t.Errorf("pipeline GetReadBatchSize() = %d, want 200", got)
		}
		if got := s.Limits.GetReadTimeout(); got != 2*time.Second {
			t.Errorf("pipeline GetReadTimeout() = %v, want 2s", got)
		}
		if got := s.Vertices[1].Limits.GetReadBatchSize(); got != 50 {
			t.Errorf("route GetReadBatchSize() = %d, want 50", got)
		}
		// A vertex without limits has a nil *PipelineLimits; its embedded config.Limits
		// is only reachable when it is not nil.
		if s.Vertices[0].Limits != nil {
			t.Errorf("vertex in has limits %+v", s.Vertices[0].Limits)
		}
		if config.DefaultBufferMaxLength != 30000 || config.DefaultBufferUsageLimit != 80 {
			t.Error("buffer defaults changed")
		}
	})

	t.Run("http maxQueueBytes", func(t *testing.T) {
		for yaml, want := range map[string]int64{
			"{}":                       128 << 20,
			"{maxQueueBytes: 1024}":    1024,
			"{maxQueueBytes: 1048576}": 1 << 20,
		} {
			f := mustParse(t, strings.Replace(minimalMonoVertex, "generator: {}", "http: "+yaml, 1))
			if got := HTTPMaxQueueBytes(f.MonoVertex.Spec.Source.HTTP); got != want {
				t.Errorf("%s: HTTPMaxQueueBytes = %d, want %d", yaml, got, want)
			}
		}
		var none *config.HTTPSource
		if got := HTTPMaxQueueBytes(none); got != source.DefaultHTTPMaxQueueBytes {
			t.Errorf("nil HTTPMaxQueueBytes = %d", got)
		}
	})

	t.Run("http pace", func(t *testing.T) {
		for yaml, want := range map[string]source.HTTPConfig{
			"{}": {},
			"{readHeaderTimeout: 2s, readBodyTimeout: 3s, minBodyBytesPerSecond: 100, idleTimeout: 1m, maxConnections: 10}": {
				ReadHeaderTimeout: 2 * time.Second, ReadBodyTimeout: 3 * time.Second, MinBodyBytesPerSecond: 100,
				IdleTimeout: time.Minute, MaxConnections: 10},
		} {
			f := mustParse(t, strings.Replace(minimalMonoVertex, "generator: {}", "http: "+yaml, 1))
			var got source.HTTPConfig
			httpPace(&got, f.MonoVertex.Spec.Source.HTTP)
			if got.ReadHeaderTimeout != want.ReadHeaderTimeout || got.ReadBodyTimeout != want.ReadBodyTimeout ||
				got.MinBodyBytesPerSecond != want.MinBodyBytesPerSecond || got.IdleTimeout != want.IdleTimeout ||
				got.MaxConnections != want.MaxConnections {
				t.Errorf("%s: httpPace = %+v, want %+v", yaml, got, want)
			}
		}
	})
}

func TestLimiterConfig(t *testing.T) {
	tests := []struct {
		name      string
		rateLimit string // the body of spec.limits.rateLimit, indented 6 spaces
		want      ratelimit.Config
	}{
		{
			name:      "relaxed by default",
			rateLimit: "max: 100\n",
			want:      ratelimit.DefaultConfig(100),
		},
		{
			name:      "relaxed",
			rateLimit: "max: 100\nmin: 10\nrampUpDuration: 10s\nmodes:\n  relaxed: {}\n",
			want: ratelimit.Config{CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 100, Min: 10, RampUpDuration: 10 * time.Second, Mode: ratelimit.Relaxed,
				ThresholdPercentage: 50, CoolDownPeriod: 5 * time.Second, RampDownPercentage: 50},
		},
		{
			name:      "relaxed given as null",
			rateLimit: "max: 100\nmodes:\n  relaxed:\n",
			want:      ratelimit.DefaultConfig(100),
		},
		{
			name:      "scheduled with pacing",
			rateLimit: "max: 200\nmin: 20\nrampUpDuration: 9s\nmodes:\n  scheduled: {}\npacing: 50ms\n",
			want: ratelimit.Config{CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 200, Min: 20, RampUpDuration: 9 * time.Second, Mode: ratelimit.Scheduled,
				ThresholdPercentage: 50, CoolDownPeriod: 5 * time.Second, RampDownPercentage: 50, Pacing: 50 * time.Millisecond},
		},
		{
			name:      "onlyIfUsed with its default threshold",
			rateLimit: "max: 100\nmodes:\n  onlyIfUsed: {}\n",
			want: ratelimit.Config{CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 100, Min: 1, RampUpDuration: time.Second, Mode: ratelimit.OnlyIfUsed,
				ThresholdPercentage: 50, CoolDownPeriod: 5 * time.Second, RampDownPercentage: 50},
		},
		{
			name:      "onlyIfUsed",
			rateLimit: "max: 500\nmin: 50\nmodes:\n  onlyIfUsed:\n    thresholdPercentage: 80\n",
			want: ratelimit.Config{CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 500, Min: 50, RampUpDuration: time.Second, Mode: ratelimit.OnlyIfUsed,
				ThresholdPercentage: 80, CoolDownPeriod: 5 * time.Second, RampDownPercentage: 50},
		},
		{
			name:      "onlyIfUsed threshold 0",
			rateLimit: "max: 500\nmodes:\n  onlyIfUsed:\n    thresholdPercentage: 0\n",
			want: ratelimit.Config{CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 500, Min: 1, RampUpDuration: time.Second, Mode: ratelimit.OnlyIfUsed,
				ThresholdPercentage: 0, CoolDownPeriod: 5 * time.Second, RampDownPercentage: 50},
		},
		{
			name:      "goBackN",
			rateLimit: "max: 1000\nmin: 100\nrampUpDuration: 30s\nmodes:\n  goBackN:\n    thresholdPercentage: 70\n    coolDownPeriod: 10s\n    rampDownPercentage: 25\n",
			want: ratelimit.Config{CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 1000, Min: 100, RampUpDuration: 30 * time.Second, Mode: ratelimit.GoBackN,
				ThresholdPercentage: 70, CoolDownPeriod: 10 * time.Second, RampDownPercentage: 25},
		},
		{
			name:      "goBackN with defaults",
			rateLimit: "max: 1000\nmodes:\n  goBackN:\n    coolDownPeriod: 1m\n",
			want: ratelimit.Config{CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 1000, Min: 1, RampUpDuration: time.Second, Mode: ratelimit.GoBackN,
				ThresholdPercentage: 50, CoolDownPeriod: time.Minute, RampDownPercentage: 50},
		},
		{
			name:      "min 0 and no ramp",
			rateLimit: "max: 10\nmin: 0\nrampUpDuration: 0s\n",
			want: ratelimit.Config{CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 10, Min: 0, RampUpDuration: 0, Mode: ratelimit.Relaxed,
				ThresholdPercentage: 50, CoolDownPeriod: 5 * time.Second, RampDownPercentage: 50},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := "      " + strings.ReplaceAll(strings.TrimSuffix(tt.rateLimit, "\n"), "\n", "\n      ") + "\n"
			f := mustParse(t, minimalMonoVertex+"  limits:\n    rateLimit:\n"+body)
			got := LimiterConfig(f.MonoVertex.Spec.Limits.GetRateLimit())
			if got != tt.want {
				t.Errorf("LimiterConfig() =\n %+v\nwant\n %+v", got, tt.want)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
		})
	}

	t.Run("adaptive", func(t *testing.T) {
		f := mustLoad(t, "../../config/examples/adaptive.yaml")
		r := f.MonoVertex.Spec.Limits.GetRateLimit()
		if got := LimiterConfig(r); !got.Adaptive || got.CutPercentage != 20 {
			t.Errorf("LimiterConfig() = %+v; want adaptive with a cut of 20%%", got)
		}
		if got := SignalKinds(r.Adaptive); fmt.Sprint(got) != "[http429 http503]" {
			t.Errorf("SignalKinds() = %v; want [http429 http503]", got)
		}
		if got := SignalKinds(&config.Adaptive{}); fmt.Sprint(got) != fmt.Sprint(isb.Signals) {
			t.Errorf("SignalKinds() of adaptive: {} = %v; want all, %v", got, isb.Signals)
		}
	})
	// The good configs with one file per mode.
	for file, want := range map[string]ratelimit.Config{
		"monovertex-ratelimit-relaxed.yaml": ratelimit.DefaultConfig(50),
		"monovertex-ratelimit-scheduled.yaml": {CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 200, Min: 20, RampUpDuration: 9 * time.Second, Mode: ratelimit.Scheduled,
			ThresholdPercentage: 50, CoolDownPeriod: 5 * time.Second, RampDownPercentage: 50, Pacing: time.Millisecond},
		"monovertex-ratelimit-onlyifused.yaml": {CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 500, Min: 50, RampUpDuration: 10 * time.Second, Mode: ratelimit.OnlyIfUsed,
			ThresholdPercentage: 80, CoolDownPeriod: 5 * time.Second, RampDownPercentage: 50},
		"monovertex-ratelimit-gobackn.yaml": {CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 1000, Min: 100, RampUpDuration: 30 * time.Second, Mode: ratelimit.GoBackN,
			ThresholdPercentage: 70, CoolDownPeriod: 10 * time.Second, RampDownPercentage: 25, Pacing: 100 * time.Millisecond,
			StaleAfter: 3 * time.Second, OnStoreFailure: ratelimit.Pause, ResumedRampUp: true},
	} {
		t.Run(file, func(t *testing.T) {
			f := mustLoad(t, filepath.Join("../../config/testdata/good", file))
			if got := LimiterConfig(f.MonoVertex.Spec.Limits.GetRateLimit()); got != want {
				t.Errorf("LimiterConfig() =\n %+v\nwant\n %+v", got, want)
			}
		})
	}

	t.Run("sluice's fields", func(t *testing.T) {
		f := mustLoad(t, "../../config/testdata/good/monovertex-ratelimit-gobackn.yaml")
		r := f.MonoVertex.Spec.Limits.GetRateLimit()
		switch {
		case r.ResumedRampUp == nil || !*r.ResumedRampUp:
			t.Errorf("resumedRampUp = %v, want true", r.ResumedRampUp)
		case r.TTL == nil || r.TTL.Duration != 120*time.Second:
			t.Errorf("ttl = %v, want 120s", r.TTL)
		case r.ExcludeDropped == nil || !*r.ExcludeDropped:
			t.Errorf("excludeDropped = %v, want true", r.ExcludeDropped)
		case r.StaleAfter == nil || r.StaleAfter.Duration != 3*time.Second:
			t.Errorf("staleAfter = %v, want 3s", r.StaleAfter)
		case r.SyncInterval == nil || r.SyncInterval.Duration != 250*time.Millisecond:
			t.Errorf("syncInterval = %v, want 250ms", r.SyncInterval)
		case r.OnStoreFailure == nil || LimiterConfig(r).OnStoreFailure != ratelimit.Pause:
			t.Errorf("onStoreFailure = %v, want pause", r.OnStoreFailure)
		case r.Store == nil || r.Store.InMemoryStore == nil || r.Store.RedisStore != nil || r.Store.ReplicaCountStore != nil:
			t.Errorf("store = %+v, want inMemoryStore", r.Store)
		}
	})

	t.Run("example", func(t *testing.T) {
		f := mustLoad(t, "../../config/examples/monovertex.yaml")
		r := f.MonoVertex.Spec.Limits.GetRateLimit()
		want := ratelimit.Config{CutPercentage: ratelimit.DefaultCutPercentage, HoldBelowPercentage: ratelimit.DefaultHoldBelowPercentage, ProbeAfter: ratelimit.DefaultProbeAfter, ForgetAfter: ratelimit.DefaultForgetAfter, Max: 20, Min: 5, RampUpDuration: 5 * time.Second, Mode: ratelimit.Relaxed,
			ThresholdPercentage: 50, CoolDownPeriod: 5 * time.Second, RampDownPercentage: 50}
		if got := LimiterConfig(r); got != want {
			t.Errorf("LimiterConfig() =\n %+v\nwant\n %+v", got, want)
		}
		if r.Store == nil || r.Store.InMemoryStore == nil {
			t.Errorf("store = %+v, want inMemoryStore", r.Store)
		}
	})
}

func TestErrorHasFileName(t *testing.T) {
	path := filepath.Join("../../config/testdata", "bad", "several-problems.yaml")
	f, err := Load(path)
	problems := problemsOf(t, f, err)
	var ce *config.Error
	errors.As(err, &ce)
	if ce.File != path {
		t.Errorf("config.File = %q, want %q", ce.File, path)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(problems) {
		t.Fatalf("%d lines for %d problems:\n%v", len(lines), len(problems), err)
	}
	for i, line := range lines {
		if want := path + ": " + problems[i].String(); line != want {
			t.Errorf("line %d = %q, want %q", i, line, want)
		}
	}

	// Parse knows no file name: the lines are the problems alone.
	data, _ := readFile(path)
	_, err = Parse(data)
	for i, line := range strings.Split(err.Error(), "\n") {
		if line != problems[i].String() {
			t.Errorf("Parse: line %d = %q, want %q", i, line, problems[i].String())
		}
	}

	// Errors before decoding (the YAML itself) name the file too.
	for _, name := range []string{"yaml-syntax-error.yaml", "empty.yaml", "two-documents.yaml", "unknown-kind.yaml"} {
		path := filepath.Join("../../config/testdata", "bad", name)
		_, err := Load(path)
		if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
			t.Errorf("Load(%s) = %v, want it to start with the path", name, err)
		}
	}

	t.Run("multi-line message", func(t *testing.T) {
		path := filepath.Join("../../config/testdata", "bad", "filter-bad-expression.yaml")
		_, err := Load(path)
		if err == nil {
			t.Fatal("loads")
		}
		for line := range strings.SplitSeq(err.Error(), "\n") {
			if !strings.HasPrefix(line, path+": ") {
				t.Errorf("a line without the file name: %q in\n%v", line, err)
			}
		}
	})

	t.Run("missing file", func(t *testing.T) {
		_, err := Load(filepath.Join("../../config/testdata", "no-such-file.yaml"))
		var ce *config.Error
		if !errors.Is(err, fs.ErrNotExist) || errors.As(err, &ce) {
			t.Errorf("Load(missing) = %v, want a not-exist error", err)
		}
	})
}

func TestProblemsSortedByLine(t *testing.T) {
	// several-problems.yaml's decoder finds the unknown field (line 20) before the
	// validator finds the rest; the report is in line order all the same.
	f, err := Load("../../config/testdata/bad/several-problems.yaml")
	problems := problemsOf(t, f, err)
	var got []string
	for _, p := range problems {
		got = append(got, p.Path)
	}
	want := []string{"metadata.name", "spec.sink", "spec.limits.readBatchSize", "spec.limits.rateLimit.min", "spec.source.generator.msgsize"}
	if !slices.Equal(got, want) {
		t.Errorf("paths = %q, want %q", got, want)
	}
	var lines []int
	for _, p := range problems {
		lines = append(lines, p.Line)
	}
	if wantLines := []int{10, 11, 13, 16, 20}; !slices.Equal(lines, wantLines) {
		t.Errorf("lines = %v, want %v", lines, wantLines)
	}

	// Every file of the corpus reports in line order.
	for _, path := range corpus(t, 35, "../../config/testdata/bad/*.yaml") {
		data, err := readFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var ce *config.Error
		if _, err := Parse(data); errors.As(err, &ce) && !sortedByLine(ce.Problems) {
			t.Errorf("%s: problems are not sorted by line: %v", path, ce.Problems)
		}
	}
}

func TestEmptyInput(t *testing.T) {
	for _, in := range []string{"", "\n", "   \n\n", "# only a comment\n"} {
		_, err := Parse([]byte(in))
		var ce *config.Error
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0].Msg != "the file is empty" {
			t.Errorf("Parse(%q) = %v, want the file is empty", in, err)
		}
	}
}

func TestProblemString(t *testing.T) {
	for _, tt := range []struct {
		p    config.Problem
		want string
	}{
		{config.Problem{Path: "spec.limits.rateLimit.min", Line: 9, Msg: "(50) > max (10)"}, "spec.limits.rateLimit.min (50) > max (10) (line 9)"},
		{config.Problem{Path: "spec.source", Line: 3, Msg: "is required"}, "spec.source: is required (line 3)"},
		{config.Problem{Path: "spec.source", Msg: "is required"}, "spec.source: is required"},
		{config.Problem{Msg: "the file is empty"}, "the file is empty"},
		{config.Problem{Line: 12, Msg: "the file holds more than one YAML document"}, "the file holds more than one YAML document (line 12)"},
	} {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.p, got, tt.want)
		}
	}
}

func TestPipelineValues(t *testing.T) {
	f := mustLoad(t, "../../config/testdata/good/pipeline.yaml")
	s := f.Pipeline.Spec
	if f.Name() != "orders-pipeline" || s.InterStepBufferServiceName != "default" {
		t.Errorf("name %q, interStepBufferServiceName %q", f.Name(), s.InterStepBufferServiceName)
	}
	if s.ISB == nil || s.ISB.JetStream == nil || s.ISB.JetStream.URL != "nats://localhost:4222" {
		t.Errorf("isb = %+v", s.ISB)
	}
	if l := s.Limits; *l.BufferMaxLength != 50000 || *l.BufferUsageLimit != 85 || *l.Concurrency != 400 {
		t.Errorf("pipeline limits = %+v", l)
	}
	var names []string
	for _, v := range s.Vertices {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"in", "route", "out"}) {
		t.Errorf("vertices = %q", names)
	}
	if v := s.Vertices[1]; v.UDF == nil || v.UDF.Builtin.Name != "filter" || *v.Limits.BufferUsageLimit != 70 ||
		LimiterConfig(v.Limits.RateLimit).Mode != ratelimit.OnlyIfUsed {
		t.Errorf("route = %+v", v)
	}
	if p := s.Vertices[2].Partitions; p == nil || *p != 2 {
		t.Errorf("out partitions = %v, want 2", p)
	}
	type edge struct{ from, to, op, onFull string }
	var edges []edge
	for _, e := range s.Edges {
		ed := edge{from: e.From, to: e.To}
		if e.Conditions != nil && e.Conditions.Tags != nil && e.Conditions.Tags.Operator != nil {
			ed.op = Operator(e.Conditions.Tags).String()
		}
		if e.OnFull != nil {
			ed.onFull = OnFull(&e).String()
		}
		edges = append(edges, ed)
	}
	want := []edge{{"in", "route", "or", ""}, {"route", "out", "and", "discardLatest"}, {"in", "out", "not", "retryUntilSuccess"}}
	if !slices.Equal(edges, want) {
		t.Errorf("edges = %+v, want %+v", edges, want)
	}
}

func TestVertexLimits(t *testing.T) {
	f := mustParse(t, `apiVersion: numaflow.numaproj.io/v1alpha1
kind: Pipeline
metadata:
  name: p
spec:
  limits:
    readBatchSize: 100
    readTimeout: 2s
    udfTimeout: 20s
    bufferMaxLength: 1000
    rateLimit:
      max: 50
      min: 5
  vertices:
    - name: in
      source:
        generator: {}
    - name: mid
      udf:
        builtin:
          name: cat
      limits:
        readBatchSize: 10
        bufferUsageLimit: 60
        udfTimeout: 5s
        rateLimit:
          max: 20
    - name: out
      sink:
        log: {}
  edges:
    - from: in
      to: mid
    - from: mid
      to: out
`)
	p := f.Pipeline
	tests := []struct {
		vertex                      string
		batch, maxLen, usage, rlMax int
		timeout                     time.Duration
		rlMin                       int
		udfTimeout                  time.Duration
	}{
		{"in", 100, 1000, config.DefaultBufferUsageLimit, 50, 2 * time.Second, 5, 20 * time.Second},
		{"mid", 10, 1000, 60, 20, 2 * time.Second, 5, 5 * time.Second},
		{"out", 100, 1000, config.DefaultBufferUsageLimit, 50, 2 * time.Second, 5, 20 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.vertex, func(t *testing.T) {
			l, err := p.VertexLimits(tt.vertex)
			if err != nil {
				t.Fatal(err)
			}
			rl := l.GetRateLimit()
			if l.GetReadBatchSize() != tt.batch || l.GetBufferMaxLength() != tt.maxLen || l.GetBufferUsageLimit() != tt.usage ||
				l.GetReadTimeout() != tt.timeout || rl == nil || int(*rl.Max) != tt.rlMax || int(*rl.Min) != tt.rlMin ||
				l.GetUDFTimeout() != tt.udfTimeout {
				t.Fatalf("limits = %+v, rate limit %+v", l, rl)
			}
		})
	}
	if _, err := p.VertexLimits("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown vertex: %v", err)
	}
	if p.Spec.Limits.ReadBatchSize == nil || *p.Spec.Limits.ReadBatchSize != 100 {
		t.Fatal("VertexLimits changed the pipeline's limits")
	}
}

// The JetStream ISB's durations are the jetstream package's to default: unset,
// the getters give 0, which it takes for its defaults.
func TestJetStreamGetters(t *testing.T) {
	var unset *config.JetStreamISB
	if unset.GetAckWait() != 0 || unset.GetDuplicates() != 0 || unset.GetFrameSize() != 1 || Storage(unset) != jetstream.FileStorage {
		t.Errorf("nil getters: ackWait %v, duplicates %v, frameSize %d, storage %v",
			unset.GetAckWait(), unset.GetDuplicates(), unset.GetFrameSize(), Storage(unset))
	}
	js := &config.JetStreamISB{AckWait: &config.Duration{Duration: 5 * time.Second}, Duplicates: &config.Duration{Duration: time.Minute}}
	if js.GetAckWait() != 5*time.Second || js.GetDuplicates() != time.Minute {
		t.Errorf("getters: ackWait %v, duplicates %v", js.GetAckWait(), js.GetDuplicates())
	}
}

// TestByteConfig: a byte limit takes the block's ramp, mode and shadow, its
// own max and min (default 1% of max, at least 1), and neither pacing nor
// adaptive cuts.
func TestByteConfig(t *testing.T) {
	f, err := Parse([]byte(`apiVersion: numaflow.numaproj.io/v1alpha1
kind: MonoVertex
metadata: {name: mv}
spec:
  limits:
    rateLimit:
      max: 10
      rampUpDuration: 4s
      modes: {goBackN: {coolDownPeriod: 2s}}
      shadow: true
      pacing: 100ms
      adaptive: {}
      bytes: {max: 150}
  source: {generator: {}}
  sink: {log: {}}
`))
	if err != nil {
		t.Fatal(err)
	}
	rl := f.MonoVertex.Spec.Limits.RateLimit
	c := ByteConfig(rl)
	if c == nil || c.Max != 150 || c.Min != 1 || c.RampUpDuration != 4*time.Second || c.Mode != ratelimit.GoBackN ||
		c.CoolDownPeriod != 2*time.Second || !c.Shadow || c.Pacing != 0 || c.Adaptive {
		t.Fatalf("ByteConfig = %+v", c)
	}
	thousand := uint64(1000)
	rl.Bytes.Max = &thousand
	if c := ByteConfig(rl); c.Min != 10 {
		t.Fatalf("min %d; want 1%% of 1000", c.Min)
	}
	rl.Bytes = nil
	if c := ByteConfig(rl); c != nil {
		t.Fatalf("ByteConfig of no bytes = %+v", c)
	}
}
