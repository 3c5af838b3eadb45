package simulate

import "testing"

func TestFormatMilli(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0"},
		{1, "0.001"},
		{10, "0.01"},
		{100, "0.1"},
		{999, "0.999"},
		{1000, "1"},
		{1001, "1.001"},
		{1010, "1.01"},
		{1500, "1.5"},
		{13333, "13.333"},
		{16666, "16.666"},
		{110000, "110"},
		{1_000_000_000_000_000, "1000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := formatMilli(tt.in); got != tt.want {
				t.Fatalf("formatMilli(%d) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
