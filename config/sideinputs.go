package config

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// SideInput is one of a pipeline's side inputs: a container serving
// sideinput.v1, asked for the side input's value on its trigger's schedule;
// the vertices that name it read the value as a file.
type SideInput struct {
	Name      string           `yaml:"name"`
	Container *Container       `yaml:"container"`
	Volumes   K8s              `yaml:"volumes"`
	Trigger   SideInputTrigger `yaml:"trigger"`
}

// SideInputTrigger says when a side input's container is asked for a value:
// at every time Schedule matches, read in Timezone (default UTC).
type SideInputTrigger struct {
	// Schedule is a cron expression: five fields (minute hour day-of-month
	// month day-of-week), six with seconds first, or a descriptor (@hourly,
	// @daily, @every 30s...), as Numaflow reads it.
	Schedule string `yaml:"schedule"`
	// Timezone is an IANA time zone name; "" is UTC.
	Timezone *string `yaml:"timezone"`
}

// Schedule is a parsed trigger: Next gives the first time after t at which
// the side input is asked again.
type Schedule struct {
	cron cron.Schedule
	loc  *time.Location
}

// Next returns the first time the schedule matches after t, in t's location.
func (s Schedule) Next(t time.Time) time.Time {
	return s.cron.Next(t.In(s.loc)).In(t.Location())
}

// scheduleParser reads five fields, six with seconds first, or a descriptor.
var scheduleParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses the trigger; the error does not name the field (the
// checker does).
func (t SideInputTrigger) ParseSchedule() (Schedule, error) {
	loc := time.UTC
	if t.Timezone != nil && *t.Timezone != "" {
		l, err := time.LoadLocation(*t.Timezone)
		if err != nil {
			return Schedule{}, fmt.Errorf("timezone %q: %w", *t.Timezone, err)
		}
		loc = l
	}
	sched, err := scheduleParser.Parse(t.Schedule)
	if err != nil {
		return Schedule{}, err
	}
	return Schedule{cron: sched, loc: loc}, nil
}

// sideInputs checks the pipeline's side inputs: names unique, a container,
// and a schedule that parses in a time zone that exists.
func (c *checker) sideInputs(s *PipelineSpec) {
	seen := map[string]bool{}
	for i, si := range s.SideInputs {
		path := fmt.Sprintf("spec.sideInputs[%d]", i)
		c.name(path+".name", si.Name)
		if seen[si.Name] && si.Name != "" {
			c.add(path+".name", "(%q) is used by another side input", si.Name)
		}
		seen[si.Name] = true
		if si.Container == nil {
			c.required(path + ".container")
		} else {
			c.container(path+".container", si.Container)
		}
		c.trigger(path+".trigger", si.Trigger)
	}
}

// trigger checks a side input's trigger.
func (c *checker) trigger(path string, t SideInputTrigger) {
	if t.Timezone != nil && *t.Timezone != "" {
		if _, err := time.LoadLocation(*t.Timezone); err != nil {
			c.add(path+".timezone", "(%q) is not a time zone: %v", *t.Timezone, err)
			return
		}
	}
	if t.Schedule == "" {
		c.required(path + ".schedule")
		return
	}
	if every, ok := strings.CutPrefix(t.Schedule, "@every "); ok {
		switch d, err := ParseDuration(strings.TrimSpace(every)); {
		case errors.Is(err, ErrDurationRange):
			c.add(path+".schedule", "(%q): the interval is %v", t.Schedule, err)
			return
		case err == nil && d <= 0:
			c.add(path+".schedule", "(%q): the interval must be positive", t.Schedule)
			return
		}
	}
	if _, err := scheduleParser.Parse(t.Schedule); err != nil {
		c.add(path+".schedule", "(%q) is not a cron schedule (five fields, six with seconds first, or a descriptor such as @every 30s): %v", t.Schedule, err)
	}
}

// vertexSideInputs checks that the side inputs a vertex names are the
// pipeline's, each named once.
func (c *checker) vertexSideInputs(path string, v *Vertex, defined []SideInput) {
	seen := map[string]bool{}
	for i, name := range v.SideInputs {
		p := fmt.Sprintf("%s.sideInputs[%d]", path, i)
		switch {
		case seen[name]:
			c.add(p, "(%q) is named twice", name)
		case !hasSideInput(defined, name):
			c.add(p, "(%q) is not a side input of the pipeline (spec.sideInputs)", name)
		}
		seen[name] = true
	}
}

func hasSideInput(defined []SideInput, name string) bool {
	for _, si := range defined {
		if si.Name == name {
			return true
		}
	}
	return false
}
