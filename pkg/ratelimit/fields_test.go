package ratelimit

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// bump sets v, a number or a bool, to another value.
func bump(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
	default:
		t.Fatalf("bump: a %s; teach the test to change it", v.Type())
	}
}

// TestFieldsCoverConfig fails when a field of Config is not in Fields, so that
// a new one says whether it can change live.
func TestFieldsCoverConfig(t *testing.T) {
	cfg := reflect.TypeFor[Config]()
	var goNames, yamlNames []string
	for _, f := range Fields {
		if f.YAML == "" {
			t.Errorf("%+v has no YAML name", f)
		}
		yamlNames = append(yamlNames, f.YAML)
		if f.Go == "" {
			continue
		}
		if _, ok := cfg.FieldByName(f.Go); !ok {
			t.Errorf("Fields: %s (%s) is not a field of Config", f.Go, f.YAML)
		}
		goNames = append(goNames, f.Go)
		if g, _ := FieldOf(f.Go); g != f {
			t.Errorf("FieldOf(%q) = %+v; want %+v", f.Go, g, f)
		}
	}
	for i := range cfg.NumField() {
		if name := cfg.Field(i).Name; !slices.Contains(goNames, name) {
			t.Errorf("Config.%s is not in Fields: add it with its YAML name and whether it can change live", name)
		}
	}
	for _, names := range [][]string{goNames, yamlNames} {
		if s := slices.Sorted(slices.Values(names)); len(slices.Compact(s)) != len(names) {
			t.Errorf("a name is in Fields twice: %v", names)
		}
	}
	// A reloaded config is told live or not by the settings at the top of
	// its rateLimit block, so a nested setting is live when its block is.
	for _, f := range Fields {
		top, _, nested := strings.Cut(f.YAML, ".")
		if !nested {
			continue
		}
		i := slices.IndexFunc(Fields, func(b Field) bool { return b.YAML == top })
		switch {
		case i < 0:
			t.Errorf("%s: its block %s is not in Fields", f.YAML, top)
		case Fields[i].Live != f.Live:
			t.Errorf("%s has Live %v, and its block %s %v", f.YAML, f.Live, top, Fields[i].Live)
		}
	}
	if _, ok := FieldOf(""); ok {
		t.Error("FieldOf(\"\") found a setting")
	}
}

// TestFieldsLiveConfig checks that the live settings the store exchanges are
// the Config fields Fields marks live, and that live and withLive carry each
// of them and no other.
func TestFieldsLiveConfig(t *testing.T) {
	var live []string
	for _, f := range Fields {
		if f.Live && f.Go != "" {
			live = append(live, f.Go)
		}
	}
	lc, cfg := reflect.TypeFor[liveConfig](), reflect.TypeFor[Config]()
	var got []string
	for i := range lc.NumField() {
		f := lc.Field(i)
		got = append(got, f.Name)
		if cf, ok := cfg.FieldByName(f.Name); ok && cf.Type != f.Type {
			t.Errorf("liveConfig.%s is a %s; Config's is a %s", f.Name, f.Type, cf.Type)
		}
	}
	slices.Sort(live)
	slices.Sort(got)
	if !slices.Equal(got, live) {
		t.Fatalf("liveConfig has %v; Fields marks %v live", got, live)
	}

	var all Config
	v := reflect.ValueOf(&all).Elem()
	for i := range v.NumField() {
		bump(t, v.Field(i))
	}
	carried := reflect.ValueOf(Config{}.withLive(all.live()))
	for i := range v.NumField() {
		name := cfg.Field(i).Name
		moved := !carried.Field(i).IsZero()
		if isLive := slices.Contains(live, name); moved != isLive {
			t.Errorf("withLive(live()) carries %s: %v; live: %v", name, moved, isLive)
		}
	}
}

// TestNotLiveFollowsFields changes each Config field alone: Update's check
// refuses a change of each field Fields does not mark live, naming it, and
// lets the others through.
func TestNotLiveFollowsFields(t *testing.T) {
	for _, f := range Fields {
		if f.Go == "" {
			continue
		}
		t.Run(f.Go, func(t *testing.T) {
			base := DefaultConfig(100)
			next := base
			bump(t, reflect.ValueOf(&next).Elem().FieldByName(f.Go))
			err := notLive(base, next)
			var nl *NotLiveError
			switch {
			case f.Live && err != nil:
				t.Fatalf("notLive = %v; %s is live", err, f.Go)
			case !f.Live && (!errors.As(err, &nl) || !errors.Is(err, ErrNotLive) || nl.Field != f.Go):
				t.Fatalf("notLive = %v; want a NotLiveError naming %s, matching ErrNotLive", err, f.Go)
			}
		})
	}
}

func TestFieldPath(t *testing.T) {
	for _, tt := range []struct {
		goName string
		mode   Mode
		want   string
	}{
		{"Max", Relaxed, "max"},
		{"CutPercentage", GoBackN, "adaptive.cutPercentage"},
		{"CoolDownPeriod", GoBackN, "modes.goBackN.coolDownPeriod"},
		{"ThresholdPercentage", OnlyIfUsed, "modes.onlyIfUsed.thresholdPercentage"},
	} {
		f, ok := FieldOf(tt.goName)
		if got := f.Path(tt.mode); !ok || got != tt.want {
			t.Errorf("FieldOf(%q).Path(%s) = %q, %v; want %q", tt.goName, tt.mode, got, ok, tt.want)
		}
	}
}
