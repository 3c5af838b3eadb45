package serverinfo

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestWriteReadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), MapInfoFile)
	want := ServerInfo{
		Protocol:               ProtocolUDS,
		Language:               LanguageGo,
		MinimumNumaflowVersion: "1.4.0-z",
		Version:                "v0.12.0",
		Metadata:               map[string]string{MapModeKey: MapModeStream, "other": "x"},
	}
	if err := Write(path, want); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Read = %+v, want %+v", got, want)
	}
	if got.MapKind() != KindMapStream {
		t.Errorf("MapKind = %q, want %q", got.MapKind(), KindMapStream)
	}

	// Overwriting replaces the content and leaves no temporary files behind.
	want.Metadata = nil
	if err := Write(path, want); err != nil {
		t.Fatalf("second Write: %v", err)
	}
	if got, err = Read(path); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Read after overwrite = %+v, %v; want %+v", got, err, want)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != MapInfoFile {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only %s", names, MapInfoFile)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("file mode = %v, want 0644", st.Mode().Perm())
	}
}

func TestWrittenBytes(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name string
		info ServerInfo
		want string
	}{
		{
			name: "unary map",
			info: Default(KindMap, "v0.12.0"),
			want: `{"protocol":"uds","language":"go","minimum_numaflow_version":"1.4.0-z","version":"v0.12.0","metadata":{"MAP_MODE":"unary-map"}}U+005C__END__`,
		},
		{
			name: "batch map writes no minimum version",
			info: Default(KindBatchMap, ""),
			want: `{"protocol":"uds","language":"go","minimum_numaflow_version":"","version":"","metadata":{"MAP_MODE":"batch-map"}}U+005C__END__`,
		},
		{
			name: "sink has null metadata",
			info: Default(KindSink, "v0.12.0"),
			want: `{"protocol":"uds","language":"go","minimum_numaflow_version":"1.4.0-z","version":"v0.12.0","metadata":null}U+005C__END__`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "info")
			if err := Write(path, c.info); err != nil {
				t.Fatalf("Write: %v", err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.want {
				t.Errorf("file content\n got %s\nwant %s", b, c.want)
			}
			enc, err := Encode(c.info)
			if err != nil || string(enc) != c.want {
				t.Errorf("Encode = %s, %v", enc, err)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	dir := t.TempDir()
	full, err := Encode(Default(KindSource, "v0.12.0"))
	if err != nil {
		t.Fatal(err)
	}
	json := strings.TrimSuffix(string(full), EndMarker)

	cases := []struct {
		name    string
		content *string // nil: no file
		check   func(error) bool
	}{
		{"missing file", nil, func(err error) bool { return errors.Is(err, fs.ErrNotExist) }},
		{"empty file", ptr(""), func(err error) bool { return errors.Is(err, ErrIncomplete) }},
		{"json without marker", ptr(json), func(err error) bool { return errors.Is(err, ErrIncomplete) }},
		{"cut inside json", ptr(json[:len(json)/2]), func(err error) bool { return errors.Is(err, ErrIncomplete) }},
		{"cut inside marker", ptr(json + EndMarker[:5]), func(err error) bool { return errors.Is(err, ErrIncomplete) }},
		{"malformed json", ptr(`{"protocol":` + EndMarker), func(err error) bool {
			return errors.Is(err, ErrMalformed) && strings.HasSuffix(err.Error(), `: malformed server info: unexpected end of JSON input, in "{\"protocol\":"`)
		}},
		{"json of another shape", ptr(`{"protocol":["uds"]}` + EndMarker), func(err error) bool {
			return errors.Is(err, ErrMalformed) && strings.Contains(err.Error(), "cannot unmarshal array")
		}},
		{"a long malformed file", ptr(strings.Repeat("x", 1000) + EndMarker), func(err error) bool {
			return errors.Is(err, ErrMalformed) && strings.HasSuffix(err.Error(), `, in "`+strings.Repeat("x", maxQuoted)+`..."`)
		}},
		{"a directory", nil, func(err error) bool {
			return errors.Is(err, ErrUnreadable) && strings.HasSuffix(err.Error(), " cannot be read: is a directory")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-"))
			if c.content != nil {
				if err := os.WriteFile(path, []byte(*c.content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.name == "a directory" {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Read(path)
			if err == nil || !c.check(err) {
				t.Fatalf("Read = %v, unexpected error kind", err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}

	// A complete file written by a non-atomic writer (JSON, then the marker,
	// as numaflow-go does it) becomes readable once the marker lands.
	path := filepath.Join(dir, "two-step")
	if err := os.WriteFile(path, []byte(json), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("Read before marker = %v, want ErrIncomplete", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(EndMarker); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(path); err != nil || got.Protocol != ProtocolUDS {
		t.Fatalf("Read after marker = %+v, %v", got, err)
	}
}

func ptr(s string) *string { return &s }

func TestWaitUnblocksWhenFileAppears(t *testing.T) {
	path := filepath.Join(t.TempDir(), SinkInfoFile)
	want := Default(KindSink, "v0.12.0")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	type result struct {
		info ServerInfo
		err  error
	}
	done := make(chan result, 1)
	started := make(chan struct{})
	go func() {
		close(started)
		info, err := Wait(ctx, path, 5*time.Millisecond)
		done <- result{info, err}
	}()
	<-started

	// First an incomplete file: the waiter must keep waiting.
	if err := os.WriteFile(path, []byte(`{"protocol":"uds"`), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("Wait returned on an incomplete file: %+v, %v", r.info, r.err)
	case <-time.After(50 * time.Millisecond): // several poll intervals
	}

	writeErr := make(chan error, 1)
	go func() { writeErr <- Write(path, want) }()

	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("Wait: %v", r.err)
		}
		if !reflect.DeepEqual(r.info, want) {
			t.Fatalf("Wait = %+v, want %+v", r.info, want)
		}
	case <-ctx.Done():
		t.Fatal("Wait did not return after the file was written")
	}
	if err := <-writeErr; err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func TestWaitReturnsAtOnceForExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), SourceInfoFile)
	if err := Write(path, Default(KindSource, "")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A poll interval far beyond the context deadline: success must not
	// depend on polling.
	if _, err := Wait(ctx, path, time.Hour); err != nil {
		t.Fatalf("Wait: %v", err)
	}
}

func TestWaitContextEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), SourceTransformerInfoFile)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := Wait(ctx, path, 5*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait = %v, want context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := Wait(ctx, path, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait on cancelled context = %v, want context.Canceled", err)
	}
}

func TestWaitFailsFastOnMalformedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), MapInfoFile)
	if err := os.WriteFile(path, []byte("not json"+EndMarker), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := Wait(ctx, path, time.Hour)
	if err == nil || errors.Is(err, ErrIncomplete) || ctx.Err() != nil {
		t.Fatalf("Wait = %v, want an immediate parse error", err)
	}
}

func TestCheck(t *testing.T) {
	ok := Default(KindMap, "v0.12.0")

	cases := []struct {
		name    string
		mutate  func(*ServerInfo)
		wantErr []string // substrings of the error; nil: no error
	}{
		{"numaflow-go v0.12 map", func(*ServerInfo) {}, nil},
		{"empty minimum is not checked", func(s *ServerInfo) { s.MinimumNumaflowVersion = "" }, nil},
		{"minimum below ours", func(s *ServerInfo) { s.MinimumNumaflowVersion = "1.1.0-z" }, nil},
		{"minimum equal to ours", func(s *ServerInfo) { s.MinimumNumaflowVersion = RuntimeVersion }, nil},
		{"minimum equal to ours with -z", func(s *ServerInfo) { s.MinimumNumaflowVersion = RuntimeVersion + "-z" }, nil},
		{"minimum 1.5.0-z (accumulator, serving)", func(s *ServerInfo) { s.MinimumNumaflowVersion = "1.5.0-z" }, nil},
		{"wrong protocol", func(s *ServerInfo) { s.Protocol = ProtocolTCP },
			[]string{`"tcp"`, `"uds"`}},
		{"empty protocol", func(s *ServerInfo) { s.Protocol = "" },
			[]string{`protocol ""`, `"uds"`}},
		{"minimum above ours", func(s *ServerInfo) { s.MinimumNumaflowVersion = "1.9.0-z" },
			[]string{"1.9.0 or later", `"1.9.0-z"`, RuntimeVersion, `"v0.12.0"`}},
		{"next major", func(s *ServerInfo) { s.MinimumNumaflowVersion = "2.0.0" },
			[]string{"2.0.0 or later", RuntimeVersion}},
		{"invalid minimum", func(s *ServerInfo) { s.MinimumNumaflowVersion = "latest" },
			[]string{`"latest"`, "invalid version"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			info := ok
			c.mutate(&info)
			err := Check(info)
			if c.wantErr == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check passed, want an error")
			}
			for _, s := range c.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}

	// Every kind as numaflow-go v0.12 writes it passes.
	for _, k := range Kinds() {
		if err := Check(Default(k, "v0.12.0")); err != nil {
			t.Errorf("Check(Default(%s)): %v", k, err)
		}
	}
}

func TestVersionSatisfies(t *testing.T) {
	cases := []struct {
		version, minimum string
		want             bool
	}{
		// "-z": the named release, final.
		{"1.4.0", "1.4.0-z", true},
		{"v1.4.0", "1.4.0-z", true},
		{"1.4.0+build.5", "1.4.0-z", true},
		{"1.4.1", "1.4.0-z", true},
		{"1.8.2", "1.4.0-z", true},
		{"2.0.0", "1.4.0-z", true},
		{"1.3.9", "1.4.0-z", false},
		{"1.4.0-rc1", "1.4.0-z", false},
		{"1.4.0-z", "1.4.0-z", false},
		{"1.4.0-zz", "1.4.0-z", false},
		{"1.5.0-rc1", "1.4.0-z", true}, // pre-release of a later release
		{"1.4.1-alpha", "1.4.0-z", true},
		{"1.3.9-rc1", "1.4.0-z", false},
		{"0.9.0", "1.4.0-z", false},
		{"1.10.0", "1.9.0-z", true}, // numeric, not lexical
		{"1.8.2", "1.9.0-z", false},
		{"1.8.2", "1.8.2-z", true},
		{"1.8.2", "1.8.3-z", false},

		// Other pre-release minimums: semver precedence within the release.
		{"1.4.0-rc1", "1.4.0-rc1", true},
		{"1.4.0-rc2", "1.4.0-rc1", true},
		{"1.4.0-rc.2", "1.4.0-rc.10", false}, // numeric identifiers compare numerically
		{"1.4.0-rc.10", "1.4.0-rc.2", true},
		{"1.4.0-beta", "1.4.0-rc1", false},
		{"1.4.0-rc1.1", "1.4.0-rc1", true}, // more identifiers rank higher
		{"1.4.0-1", "1.4.0-alpha", false},  // numeric below alphanumeric
		{"1.4.0", "1.4.0-rc1", true},
		{"1.5.0-alpha", "1.4.0-rc1", true},

		// Release minimums exclude every pre-release.
		{"1.4.0", "1.4.0", true},
		{"1.4.1", "1.4.0", true},
		{"1.3.99", "1.4.0", false},
		{"1.5.0-rc1", "1.4.0", false},
		{"v1.4.0", "v1.4.0", true},
	}
	for _, c := range cases {
		got, err := VersionSatisfies(c.version, c.minimum)
		if err != nil {
			t.Errorf("VersionSatisfies(%q, %q): %v", c.version, c.minimum, err)
			continue
		}
		if got != c.want {
			t.Errorf("VersionSatisfies(%q, %q) = %v, want %v", c.version, c.minimum, got, c.want)
		}
	}
}

func TestParseSemverRejects(t *testing.T) {
	for _, s := range []string{
		"", "latest", "1", "1.4", "1.4.0.1", "1.4.x", "01.4.0", "1.04.0", "1.4.0-",
		"1.4.0-rc..1", "1.4.0-01", "1.4.0-r_c", "1.4.0+", "1.4.0+a..b", "-1.4.0", "1.-4.0",
		"18446744073709551616.0.0",
	} {
		if _, err := parseSemver(s); err == nil {
			t.Errorf("parseSemver(%q) succeeded, want an error", s)
		}
	}
	for _, s := range []string{"0.0.0", "v1.2.3", "1.2.3-0", "1.2.3-rc.1+build-7.x", "1.2.3-x-y.z"} {
		if _, err := parseSemver(s); err != nil {
			t.Errorf("parseSemver(%q): %v", s, err)
		}
	}
}

func TestSemverOrder(t *testing.T) {
	// Strictly increasing by semver precedence (the example of semver.org
	// section 11 plus a few more).
	ordered := []string{
		"0.9.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
		"1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0-z", "1.0.0", "1.0.1",
		"1.2.0", "1.10.0", "2.0.0",
	}
	for i := range ordered {
		for j := range ordered {
			a, _ := parseSemver(ordered[i])
			b, _ := parseSemver(ordered[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.compare(b); got != want {
				t.Errorf("compare(%s, %s) = %d, want %d", ordered[i], ordered[j], got, want)
			}
		}
	}
	a, _ := parseSemver("1.0.0+x")
	b, _ := parseSemver("1.0.0+y")
	if a.compare(b) != 0 {
		t.Error("build metadata must not affect precedence")
	}
}

func TestHumanReadableVersion(t *testing.T) {
	for in, want := range map[string]string{"1.4.0-z": "1.4.0", "1.4.0-rc1": "1.4.0-rc1", "1.4.0": "1.4.0", "": ""} {
		if got := HumanReadableVersion(in); got != want {
			t.Errorf("HumanReadableVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKinds(t *testing.T) {
	cases := []struct {
		kind             Kind
		socket, infoFile string
		mapMode          string
	}{
		{KindMap, "map.sock", "mapper-server-info", "unary-map"},
		{KindBatchMap, "batchmap.sock", "mapper-server-info", "batch-map"},
		{KindMapStream, "mapstream.sock", "mapper-server-info", "stream-map"},
		{KindSink, "sink.sock", "sinker-server-info", ""},
		{KindFallbackSink, "fb-sink.sock", "fb-sinker-server-info", ""},
		{KindOnSuccessSink, "ons-sink.sock", "ons-sinker-server-info", ""},
		{KindSource, "source.sock", "sourcer-server-info", ""},
		{KindSourceTransformer, "sourcetransform.sock", "sourcetransformer-server-info", ""},
		{KindReduce, "reduce.sock", "reducer-server-info", ""},
		{KindReduceStream, "reducestream.sock", "reducestreamer-server-info", ""},
		{KindAccumulator, "accumulator.sock", "accumulator-server-info", ""},
		{KindSessionReduce, "sessionreduce.sock", "sessionreducer-server-info", ""},
		{KindSideInput, "sideinput.sock", "sideinput-server-info", ""},
	}
	if len(cases) != len(Kinds()) {
		t.Fatalf("Kinds() has %d entries, test covers %d", len(Kinds()), len(cases))
	}
	for _, c := range cases {
		if !c.kind.Valid() || c.kind.Socket() != c.socket || c.kind.InfoFile() != c.infoFile {
			t.Errorf("%s: socket %q info file %q", c.kind, c.kind.Socket(), c.kind.InfoFile())
		}
		info := Default(c.kind, "v")
		if got := info.Metadata[MapModeKey]; got != c.mapMode {
			t.Errorf("%s: MAP_MODE %q, want %q", c.kind, got, c.mapMode)
		}
		if c.kind.IsMap() != (c.mapMode != "") {
			t.Errorf("%s: IsMap = %v", c.kind, c.kind.IsMap())
		}
		if c.kind.IsMap() && info.MapKind() != c.kind {
			t.Errorf("%s: MapKind = %s", c.kind, info.MapKind())
		}
		wantMin := SDKMinimumNumaflowVersion
		if c.kind == KindBatchMap {
			wantMin = ""
		}
		if info.MinimumNumaflowVersion != wantMin || info.Protocol != "uds" || info.Language != "go" {
			t.Errorf("%s: Default = %+v", c.kind, info)
		}
	}
	if Kind("sessionreduce").Valid() {
		t.Error(`Kind("sessionreduce") must not be valid`)
	}
	if (ServerInfo{}).MapKind() != KindMap || (ServerInfo{Metadata: map[string]string{MapModeKey: "odd"}}).MapKind() != KindMap {
		t.Error("missing or unknown MAP_MODE must mean unary map")
	}
	for env, want := range map[string]Kind{"": KindSink, "udsink": KindSink, "fb-udsink": KindFallbackSink, "ons-udsink": KindOnSuccessSink} {
		if got := SinkKind(env); got != want || !got.IsSink() {
			t.Errorf("SinkKind(%q) = %s, want %s", env, got, want)
		}
	}
	if MaxMessageSize != 64*1024*1024 || EndMarker != `U+005C__END__` || DefaultDir != "/var/run/numaflow" {
		t.Error("contract constants changed")
	}
}

func TestDecodeIgnoresSpaceAfterMarker(t *testing.T) {
	full, err := Encode(Default(KindMap, "v0.12.0"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tail := range []string{"\n", "\r\n", " \n\n"} {
		info, err := Decode(append(append([]byte{}, full...), tail...))
		if err != nil || info.Protocol != "uds" {
			t.Errorf("Decode(file + %q) = %+v, %v; want the file's info", tail, info, err)
		}
	}
}
