package ratelimit

import (
	"errors"
	"reflect"
	"slices"
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
	var goNames []string
	for _, f := range Fields {
		if _, ok := cfg.FieldByName(f.Go); !ok {
			t.Errorf("Fields: %q is not a field of Config", f.Go)
		}
		goNames = append(goNames, f.Go)
		if g, _ := FieldOf(f.Go); g != f {
			t.Errorf("FieldOf(%q) = %+v; want %+v", f.Go, g, f)
		}
	}
	for i := range cfg.NumField() {
		if name := cfg.Field(i).Name; !slices.Contains(goNames, name) {
			t.Errorf("Config.%s is not in Fields: add it with whether it can change live", name)
		}
	}
	if s := slices.Sorted(slices.Values(goNames)); len(slices.Compact(s)) != len(goNames) {
		t.Errorf("a name is in Fields twice: %v", goNames)
	}
	if _, ok := FieldOf(""); ok {
		t.Error("FieldOf(\"\") found a field")
	}
}

// TestFieldsLiveConfig checks that the live settings the store exchanges are
// the Config fields Fields marks live, and that live and withLive carry each
// of them and no other.
func TestFieldsLiveConfig(t *testing.T) {
	var live []string
	for _, f := range Fields {
		if f.Live {
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
