package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sluiceflow/sluice/config"
)

// FlagSet is a command's flags: parse errors are returned once, as usage errors,
// and -h prints the usage to stdout.
type FlagSet struct {
	*flag.FlagSet
	cmd, usage string
}

// NewFlagSet returns the flags of `vertex cmd`, whose -h prints usage and
// then the flags' defaults.
func NewFlagSet(cmd, usage string) *FlagSet {
	fs := &FlagSet{FlagSet: flag.NewFlagSet("vertex "+cmd, flag.ContinueOnError), cmd: cmd, usage: usage}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// ParseArgs parses args; it returns [ErrHelp] after printing the usage for
// -h, and a usage error for a bad flag or an argument that is no flag.
func (fs *FlagSet) ParseArgs(args []string, stdout io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprint(stdout, fs.usage)
			fs.PrintDefaults()
			return ErrHelp
		}
		return Usagef("%s: %v", fs.cmd, err)
	}
	if fs.NArg() > 0 {
		return Usagef("%s: unexpected argument %q", fs.cmd, fs.Arg(0))
	}
	return nil
}

// IsSet reports whether the flag name was given.
func (fs *FlagSet) IsSet(name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// ConfigDurationVar defines a duration flag read as the durations of a config are
// ([config.ParseDuration]): a value too long for Go is said to be out of
// range, not to be no duration.
func (fs *FlagSet) ConfigDurationVar(p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationValue{p}, name, usage)
}

// durationValue is a duration flag's value.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := config.ParseDuration(s)
	switch {
	case errors.Is(err, config.ErrDurationRange):
		return err
	case err != nil:
		return errors.New("not a duration (write it like 1s, 500ms or 1m30s)")
	}
	*v.d = d
	return nil
}

// Environment variables that give the OTLP endpoint without --otlp-endpoint.
const (
	envOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// CheckOTLP checks the OTLP endpoint traces go to: --otlp-endpoint, or else
// the OTEL_EXPORTER_OTLP_* variables. The exporter would take a value that is
// no URL, or has no host, for its default endpoint without a word.
func CheckOTLP(flagValue string) error {
	for _, e := range []struct{ name, value string }{
		{"--otlp-endpoint", flagValue}, {envOTLPEndpoint, os.Getenv(envOTLPEndpoint)}, {envOTLPTracesEndpoint, os.Getenv(envOTLPTracesEndpoint)},
	} {
		if e.value == "" {
			continue
		}
		u, err := url.Parse(e.value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			return fmt.Errorf("%s (%q) must be an http:// or https:// URL, such as http://127.0.0.1:4317", e.name, e.value)
		}
		if p := u.Port(); p != "" {
			if n, err := config.ParsePort(p); err != nil || n == 0 {
				return fmt.Errorf("%s (%q): port %s is out of range: a port to connect to is 1 to %d", e.name, e.value, p, config.MaxPort)
			}
		}
		if e.name == "--otlp-endpoint" {
			return nil // the variables are not read
		}
	}
	return nil
}

// Strings is the value of a flag that can be given more than once, each
// value in order: --change 2:a.yaml --change 5:b.yaml.
type Strings []string

// String returns the values, space-separated.
func (s *Strings) String() string { return strings.Join(*s, " ") }

// Set adds v to the values.
func (s *Strings) Set(v string) error {
	*s = append(*s, v)
	return nil
}
