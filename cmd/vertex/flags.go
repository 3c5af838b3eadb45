package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// flagSet is a command's flags: parse errors are returned once, as usage errors,
// and -h prints the usage to stdout.
type flagSet struct {
	*flag.FlagSet
	cmd, usage string
}

func newFlagSet(cmd, usage string) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("vertex "+cmd, flag.ContinueOnError), cmd: cmd, usage: usage}
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args; it returns errHelp after printing the usage for -h.
func (fs *flagSet) parse(args []string, stdout io.Writer) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			fmt.Fprint(stdout, fs.usage)
			fs.PrintDefaults()
			return errHelp
		}
		return &usageError{msg: fs.cmd + ": " + err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("%s: unexpected argument %q", fs.cmd, fs.Arg(0))
	}
	return nil
}

// isSet reports whether the flag name was given.
func (fs *flagSet) isSet(name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
