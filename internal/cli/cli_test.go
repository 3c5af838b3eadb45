package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	for _, tt := range []struct {
		name, want string
		args       []string
		help       bool
	}{
		{name: "ok", args: []string{"--d", "2s"}},
		{name: "help", args: []string{"-h"}, help: true},
		{name: "unknown flag", args: []string{"--x"}, want: "cmd: flag provided but not defined: -x"},
		{name: "argument", args: []string{"extra"}, want: `cmd: unexpected argument "extra"`},
		{name: "no duration", args: []string{"--d", "soon"}, want: `cmd: invalid value "soon" for flag -d: not a duration (write it like 1s, 500ms or 1m30s)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs := NewFlagSet("cmd", "usage: cmd\n")
			var d time.Duration
			fs.ConfigDurationVar(&d, "d", time.Second, "a duration")
			var out bytes.Buffer
			err := fs.ParseArgs(tt.args, &out)
			switch {
			case tt.help:
				if !errors.Is(err, ErrHelp) || !strings.HasPrefix(out.String(), "usage: cmd\n") || !strings.Contains(out.String(), "a duration") {
					t.Fatalf("%v, %q; want ErrHelp and the usage", err, out.String())
				}
			case tt.want == "":
				if err != nil || d != 2*time.Second || !fs.IsSet("d") {
					t.Fatalf("%v, %v, set %v; want 2s, set", err, d, fs.IsSet("d"))
				}
			default:
				if err == nil || err.Error() != tt.want || !IsUsage(err) {
					t.Fatalf("%v; want the usage error %q", err, tt.want)
				}
			}
		})
	}
}

func TestReplicaIndex(t *testing.T) {
	t.Setenv("NUMAFLOW_REPLICA", "3")
	if n, err := ReplicaIndex(""); n != 3 || err != nil {
		t.Errorf("$NUMAFLOW_REPLICA 3: %d, %v; want 3", n, err)
	}
	if n, err := ReplicaIndex("1"); n != 1 || err != nil {
		t.Errorf("--replica 1: %d, %v; want 1", n, err)
	}
	const want = `--replica ("-1") must be a whole number, 0 or more`
	if _, err := ReplicaIndex("-1"); err == nil || err.Error() != want || !IsUsage(err) {
		t.Errorf("--replica -1: %v; want the usage error %q", err, want)
	}
}

func TestCheckOTLP(t *testing.T) {
	t.Setenv(envOTLPEndpoint, "")
	t.Setenv(envOTLPTracesEndpoint, "")
	for value, want := range map[string]string{
		"":                       "",
		"http://127.0.0.1:4317":  "",
		"127.0.0.1:4317":         `--otlp-endpoint ("127.0.0.1:4317") must be an http:// or https:// URL, such as http://127.0.0.1:4317`,
		"http://127.0.0.1:70000": `--otlp-endpoint ("http://127.0.0.1:70000"): port 70000 is out of range: a port to connect to is 1 to 65535`,
	} {
		err := CheckOTLP(value)
		if got := errString(err); got != want {
			t.Errorf("%q: %q; want %q", value, got, want)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
