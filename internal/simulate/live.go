package simulate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
	"github.com/sluiceflow/sluice/pkg/vertexconfig"
)

// CheckLive returns an error when next differs from base in a setting that
// cannot change while a replica runs, naming the first by its YAML path:
// "adaptive.cutPercentage (20, was 50) cannot change while a replica runs";
// or base's own error when it is not valid; or nil.
func CheckLive(base, next ratelimit.Config) error {
	l, err := ratelimit.New(base)
	if err != nil {
		return err
	}
	defer l.Close(context.Background())
	err = l.Update(next)
	var nl *ratelimit.NotLiveError
	if errors.As(err, &nl) {
		f, _ := vertexconfig.RateLimitFieldOf(nl.Field)
		return fmt.Errorf("%s (%v, was %v) cannot change while a replica runs", f.YAML, nl.New, nl.Old)
	}
	return err
}

// ParseChange parses a live change of the config, "K:FILE": from epoch K,
// the rate limit of FILE, in a simulation of epochs epochs, where K is 2 to
// epochs.
func ParseChange(s string, epochs int) (epoch int, path string, err error) {
	k, path, ok := strings.Cut(s, ":")
	n, err := strconv.Atoi(k)
	if !ok || err != nil || path == "" {
		return 0, "", errors.New("want K:FILE, K the epoch from which FILE's rate limit applies")
	}
	if n < 2 || n > epochs {
		return 0, "", fmt.Errorf("epoch %d is not from 2 to %d, the epochs of --demand", n, epochs)
	}
	return n, path, nil
}

// LiveSettings lists the settings of the limiter's config that can change
// live, by their YAML names: "max, min, rampUpDuration, modes and shadow"
// (not the byte limit, which a simulation has none of).
func LiveSettings() string {
	var names []string
	for _, f := range vertexconfig.RateLimitFields {
		if f.Live && f.Go != "" && !strings.Contains(f.YAML, ".") {
			names = append(names, f.YAML)
		}
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// RenderConfigError lists, on one line, every error of a
// [ratelimit.Config.Validate] error, a [*ratelimit.FieldError] naming its
// field by names (by the field's name in Go when names has none; the flag
// that set it, for a command line), any other by its text.
func RenderConfigError(err error, names map[string]string) string {
	name := func(f string) string {
		if n, ok := names[f]; ok {
			return n
		}
		return f
	}
	var msgs []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var fe *ratelimit.FieldError
		if errors.As(err, &fe) {
			msgs = append(msgs, fe.Render(name))
			return
		}
		msgs = append(msgs, err.Error())
	}
	walk(err)
	return strings.Join(msgs, "; ")
}
