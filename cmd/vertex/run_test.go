package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunStateDir checks that a MonoVertex, which has no reduce, refuses
// --state-dir, naming the flag. The end-to-end reduce tests run pipelines
// with it.
func TestRunStateDir(t *testing.T) {
	dir := t.TempDir()
	code, _, stderr := runVertex(t, "run", "-f", "../../config/examples/monovertex.yaml", "--state-dir", dir)
	if code != 2 || !strings.Contains(stderr, `--state-dir "`+dir+`": ../../config/examples/monovertex.yaml is a MonoVertex, which has no reduce`) {
		t.Errorf("a MonoVertex with --state-dir: exit %d, %q; want 2 naming the flag", code, stderr)
	}
}

// TestRunRefuses checks that vertex run refuses, before it starts anything,
// exit 2 and one line naming the flag or field and its value: an address that
// cannot be bound (a port out of range, a port in use), a flag that names
// nothing to run, an OTLP endpoint that is no URL, a duration out of range,
// and a server-info file that is malformed or cannot be read.
func TestRunRefuses(t *testing.T) {
	// A port in use: one this test holds.
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	inUse := held.Addr().String()
	_, inUsePort, _ := net.SplitHostPort(inUse)
	dir := t.TempDir()
	write := func(name, yaml string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("apiVersion: numaflow.numaproj.io/v1alpha1\nkind: MonoVertex\nmetadata:\n  name: mv\nspec:\n"+yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	gen := write("gen.yaml", "  source:\n    generator: {}\n  sink:\n    log: {}\n")
	httpOnHeld := write("http.yaml", "  source:\n    http:\n      ports: {http: "+inUsePort+"}\n  sink:\n    log: {}\n")
	httpsOnHeld := write("https.yaml", "  source:\n    http:\n      ports: {https: "+inUsePort+"}\n  sink:\n    log: {}\n")
	httpsOnly := write("https-only.yaml", "  source:\n    http: {}\n  sink:\n    log: {}\n")
	noCert := write("no-cert.yaml", "  source:\n    http:\n      tls:\n        certSecret: {file: "+filepath.Join(dir, "none.crt")+"}\n"+
		"        keySecret: {file: "+filepath.Join(dir, "none.key")+"}\n  sink:\n    log: {}\n")
	udf := write("udf.yaml", "  source:\n    generator: {}\n  udf:\n    container: {image: my/map:v1}\n  sink:\n    log: {}\n")
	redis := write("redis.yaml", "  limits:\n    rateLimit:\n      max: 10\n      store:\n        redisStore: {mode: single, url: \"redis://127.0.0.1:99999\"}\n"+
		"  source:\n    generator: {}\n  sink:\n    log: {}\n")
	regions := write("regions.yaml", "  limits:\n    rateLimit:\n      max: 10\n      regions: {proportions: {eu: 50, us: 50}}\n"+
		"  source:\n    generator: {}\n  sink:\n    log: {}\n")
	// udsDir returns a socket directory holding a mapper-server-info made by mk.
	udsDir := func(mk func(path string) error) string {
		d := t.TempDir()
		if err := mk(filepath.Join(d, "mapper-server-info")); err != nil {
			t.Fatal(err)
		}
		return d
	}
	malformed := udsDir(func(p string) error { return os.WriteFile(p, []byte(`{"protocol":"uds",}U+005C__END__`), 0o644) })
	unreadable := udsDir(func(p string) error { return os.Mkdir(p, 0o755) })
	free := []string{"--metrics-addr", "127.0.0.1:0"}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"metrics port out of range", []string{"-f", gen, "--metrics-addr", "127.0.0.1:99999"},
			nil, `vertex: --metrics-addr ("127.0.0.1:99999"): port 99999 is out of range (at most 65535)`},
		{"metrics port in use", []string{"-f", gen, "--metrics-addr", inUse},
			nil, `vertex: --metrics-addr ("` + inUse + `"): bind: address already in use`},
		{"metrics address without a port", []string{"-f", gen, "--metrics-addr", "127.0.0.1"},
			nil, `vertex: --metrics-addr ("127.0.0.1"): want host:port, such as :2469 or 127.0.0.1:0: missing port in address`},
		{"https port in use", append([]string{"-f", httpsOnHeld}, free...),
			nil, `vertex: spec.source.http.ports.https (` + inUsePort + `): cannot listen on :` + inUsePort + `: bind: address already in use`},
		{"http port in use", append([]string{"-f", httpOnHeld, "--http-addr", "127.0.0.1:0"}, free...),
			nil, `vertex: spec.source.http.ports.http (` + inUsePort + `): cannot listen on :` + inUsePort + `: bind: address already in use`},
		{"https address in use", append([]string{"-f", httpsOnly, "--http-addr", inUse}, free...),
			nil, `vertex: --http-addr ("` + inUse + `"): bind: address already in use`},
		{"http address out of range", append([]string{"-f", httpOnHeld, "--http-addr", "127.0.0.1:70000"}, free...),
			nil, `vertex: --http-addr ("127.0.0.1:70000"): port 70000 is out of range (at most 65535)`},
		{"plain http address out of range", append([]string{"-f", httpOnHeld, "--http-addr", "127.0.0.1:0", "--http-plain-addr", "127.0.0.1:70000"}, free...),
			nil, `vertex: --http-plain-addr ("127.0.0.1:70000"): port 70000 is out of range (at most 65535)`},
		{"plain http address and the https address", append([]string{"-f", httpOnHeld, "--http-addr", "127.0.0.1:4", "--http-plain-addr", "127.0.0.1:4"}, free...),
			nil, `vertex: --http-plain-addr ("127.0.0.1:4"): the http source's --http-addr listens on it too, and one process cannot listen on one address twice: give --http-plain-addr an address of its own`},
		{"http address without an http source", append([]string{"-f", gen, "--http-addr", "127.0.0.1:0"}, free...),
			nil, `vertex: --http-addr ("127.0.0.1:0"): MonoVertex "mv" has no http source`},
		{"plain http address without an http source", append([]string{"-f", gen, "--http-plain-addr", "127.0.0.1:0"}, free...),
			nil, `vertex: --http-plain-addr ("127.0.0.1:0"): MonoVertex "mv" has no http source`},
		{"plain http address without ports.http", append([]string{"-f", httpsOnly, "--http-addr", "127.0.0.1:0", "--http-plain-addr", "127.0.0.1:0"}, free...),
			nil, `vertex: --http-plain-addr ("127.0.0.1:0"): spec.source.http.ports.http is not set: the http source serves HTTPS only; set ports.http to serve plain HTTP besides`},
		{"an unreadable certificate", append([]string{"-f", noCert, "--http-addr", "127.0.0.1:0"}, free...),
			nil, `vertex: spec.source.http.tls: certSecret (` + filepath.Join(dir, "none.crt") + `), keySecret (` + filepath.Join(dir, "none.key") + `): open ` + filepath.Join(dir, "none.crt") + `: no such file or directory`},
		{"otlp endpoint out of range", append([]string{"-f", gen, "--otlp-endpoint", "http://127.0.0.1:99999"}, free...),
			nil, `vertex: run: --otlp-endpoint ("http://127.0.0.1:99999"): port 99999 is out of range: a port to connect to is 1 to 65535`},
		{"otlp endpoint no URL", append([]string{"-f", gen}, free...),
			map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4317"},
			`vertex: run: OTEL_EXPORTER_OTLP_ENDPOINT ("localhost:4317") must be an http:// or https:// URL, such as http://127.0.0.1:4317`},
		{"reload interval out of range", append([]string{"-f", gen, "--reload-interval", "9000000h"}, free...),
			nil, `vertex: run: invalid value "9000000h" for flag -reload-interval: out of range: a duration is at most 2562047h47m16s either way`},
		{"a region not of the rate limit", append([]string{"-f", regions, "--region", "mars"}, free...),
			nil, `vertex: --region ("mars"): vertex mv: the replica's region: "mars" is not one of the rate limit's regions (eu, us)`},
		{"a redis url with port 99999", append([]string{"-f", redis}, free...),
			nil, `: spec.limits.rateLimit.store.redisStore.url ("redis://127.0.0.1:99999"): port 99999 is out of range: a port to connect to is 1 to 65535 (line 10)`},
		{"a malformed server-info file", append([]string{"-f", udf, "--uds-dir", malformed}, free...),
			nil, `vertex: incompatible UDF server: server-info file ` + filepath.Join(malformed, "mapper-server-info") +
				`: malformed server info: invalid character '}' looking for beginning of object key string, in "{\"protocol\":\"uds\",}"`},
		{"an engine that is not one", append([]string{"-f", udf, "--containers", "nosuch"}, free...),
			nil, `vertex: run: --containers ("nosuch"): want podman, docker or none`},
		{"an engine that is not installed", append([]string{"-f", udf, "--containers", "podman"}, free...),
			map[string]string{"PATH": dir}, `vertex: --containers "podman": podman is not installed`},
		{"an image and --spawn without an engine", append([]string{"-f", udf, "--spawn", "--containers", "none"}, free...),
			nil, `vertex: vertex mv: the udf container has no command to run (image "my/map:v1"), and no container engine runs its image: install podman or docker, or give the container a command for --spawn`},
		{"a server-info file that cannot be read", append([]string{"-f", udf, "--uds-dir", unreadable}, free...),
			nil, `vertex: incompatible UDF server: server-info file ` + filepath.Join(unreadable, "mapper-server-info") + ` cannot be read: is a directory`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, _, stderr := runVertex(t, append([]string{"run", "--log-level", "error"}, tt.args...)...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			last := lines[len(lines)-1]
			if code != 2 || !strings.HasSuffix(last, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and a last line ending %q", code, stderr, tt.want)
			}
		})
	}
}

// A user-defined server that never writes its server-info file fails the
// run once --startup-timeout has passed, naming the container and the file.
func TestRunStartupTimeout(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "udf.yaml")
	if err := os.WriteFile(path, []byte("apiVersion: numaflow.numaproj.io/v1alpha1\nkind: MonoVertex\nmetadata:\n  name: mv\nspec:\n"+
		"  source:\n    generator: {}\n  udf:\n    container: {image: my/map:v1}\n  sink:\n    log: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runVertex(t, "run", "--log-level", "error", "-f", path, "--uds-dir", dir, "--metrics-addr", "127.0.0.1:0", "--startup-timeout", "200ms")
	want := "vertex: vertex mv: the udf container's map server was not ready within 200ms (--startup-timeout): it wrote no server-info file " +
		filepath.Join(dir, "mapper-server-info")
	if code != 1 || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
}

// TestDurationFlags checks that every command's duration flags say a value
// too long for Go is out of range.
func TestDurationFlags(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "--max", "10", "--demand", "1", "--ramp-up", "9000000h"},
		{"simulate", "--max", "10", "--demand", "1", "--quota", "fixed:5", "--retry-after", "-9000000h"},
		{"bench", "-f", "../../config/examples/monovertex.yaml", "--duration", "9000000h"},
		{"run", "-f", "../../config/examples/monovertex.yaml", "--reload-interval", "9000000h"},
	} {
		code, _, stderr := runVertex(t, args...)
		if flag := args[len(args)-2]; code != 2 || !strings.HasSuffix(stderr, "for flag -"+flag[2:]+": out of range: a duration is at most 2562047h47m16s either way\n") {
			t.Errorf("vertex %s: exit %d, %q; want 2, out of range", strings.Join(args, " "), code, stderr)
		}
	}
}
