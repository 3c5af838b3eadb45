package config

import (
	"testing"
	"time"
)

func TestScheduleNext(t *testing.T) {
	la := "America/Los_Angeles"
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name     string
		trigger  SideInputTrigger
		from, to string
	}{
		{"five fields", SideInputTrigger{Schedule: "*/2 * * * *"}, "2026-01-01T10:00:30Z", "2026-01-01T10:02:00Z"},
		{"six fields, seconds first", SideInputTrigger{Schedule: "*/5 * * * * *"}, "2026-01-01T10:00:31Z", "2026-01-01T10:00:35Z"},
		{"descriptor", SideInputTrigger{Schedule: "@every 3s"}, "2026-01-01T10:00:00Z", "2026-01-01T10:00:03Z"},
		{"daily in a time zone", SideInputTrigger{Schedule: "0 9 * * *", Timezone: &la}, "2026-01-01T12:00:00Z", "2026-01-01T17:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.trigger.ParseSchedule()
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Next(utc(tc.from)); !got.Equal(utc(tc.to)) {
				t.Errorf("Next(%s) = %s, want %s", tc.from, got, tc.to)
			}
		})
	}
}
