package simulate

import (
	"errors"
	"io"
	"os"

	"github.com/sluiceflow/sluice/internal/enum"
	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// Format is the text form of a simulation's epochs.
type Format uint8

const (
	// Table, the zero value, is [WriteTable]'s.
	Table Format = iota
	// CSV is [WriteCSV]'s.
	CSV
)

var formatNames = [...]string{Table: "table", CSV: "csv"}

// String returns the format's name: table or csv.
func (f Format) String() string { return enum.Name(formatNames[:], f, "Format") }

// UnmarshalText sets f to the format named text, table or csv; any other
// name is an error listing them.
func (f *Format) UnmarshalText(text []byte) error {
	return enum.Parse(f, formatNames[:], text, "format")
}

// Simulation is one run of the rate limiter on a simulated clock.
type Simulation struct {
	// Config is the limit from the first epoch.
	Config ratelimit.Config
	// Scenario is the demand, signals and live changes epoch by epoch; the
	// changes can be checked first with [CheckLive].
	Scenario
}

// ChartError is an error of [Simulation.Write] writing the chart; its text
// is the error's, Err.
type ChartError struct{ Err error }

// Error returns Err's text.
func (e *ChartError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *ChartError) Unwrap() error { return e.Err }

// Write runs s and writes its epochs to w in format, and then, when chart is
// not nil, a PNG chart of them to chart, whose error is a [*ChartError]. When
// the simulation fails, nothing is written.
func (s Simulation) Write(w io.Writer, format Format, chart io.Writer) error {
	epochs, err := Simulate(s.Config, s.Scenario)
	if err != nil {
		return err
	}
	if format == CSV {
		err = WriteCSV(w, s.Config.Mode, epochs)
	} else {
		err = WriteTable(w, s.Config, epochs)
	}
	if err != nil || chart == nil {
		return err
	}
	if err := WritePNG(chart, s.Config, epochs); err != nil {
		return &ChartError{Err: err}
	}
	return nil
}

// ChartFileError is the error of [Simulation.WriteWithChart] creating the
// chart's file; its text is Err's, the reason without the path.
type ChartFileError struct{ Err error }

// Error returns Err's text.
func (e *ChartFileError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *ChartFileError) Unwrap() error { return e.Err }

// WriteWithChart is [Simulation.Write] with the chart going to a file
// created at chartPath, no chart when it is "". The file is created first,
// so that a path that cannot be created fails, with a [*ChartFileError],
// before anything is written.
func (s Simulation) WriteWithChart(w io.Writer, format Format, chartPath string) error {
	if chartPath == "" {
		return s.Write(w, format, nil)
	}
	f, err := os.Create(chartPath)
	if err != nil {
		return &ChartFileError{Err: errors.Unwrap(err)}
	}
	defer f.Close()
	if err := s.Write(w, format, f); err != nil {
		return err
	}
	return f.Close()
}
