package simulate

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/sluiceflow/sluice/pkg/ratelimit"
)

// WritePNG writes a PNG chart of the pool and the tokens granted per epoch.
// Epochs without a call leave gaps in the lines, as they do in the tables.
// Throttle signals are red crosses at the granted count of their epoch.
func WritePNG(w io.Writer, cfg ratelimit.Config, epochs []SimEpoch) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: min %d, max %d, ramp-up %v", cfg.Mode, cfg.Min, cfg.Max, cfg.RampUpDuration)
	if cfg.Adaptive {
		p.Title.Text += fmt.Sprintf(", adaptive (cut %d%%)", cfg.CutPercentage)
	}
	p.X.Label.Text = "epoch (s)"
	p.Y.Label.Text = "tokens"
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	pool := color.RGBA{R: 31, G: 119, B: 180, A: 255}
	granted := color.RGBA{R: 255, G: 127, B: 14, A: 255}
	poolSeg := segments(epochs, func(e SimEpoch) (float64, bool) {
		return float64(e.PoolMilli) / 1000, e.Called || cfg.Mode == ratelimit.Scheduled
	})
	grantSeg := segments(epochs, func(e SimEpoch) (float64, bool) {
		return float64(e.Granted), e.Called
	})
	if err := addSeries(p, "pool", pool, draw.CircleGlyph{}, poolSeg); err != nil {
		return err
	}
	if err := addSeries(p, "granted", granted, draw.TriangleGlyph{}, grantSeg); err != nil {
		return err
	}
	if err := addSignals(p, epochs); err != nil {
		return err
	}
	p.Y.Max = max(p.Y.Max, float64(cfg.Max)*1.05)
	png, err := p.WriterTo(8*vg.Inch, 4.5*vg.Inch, "png")
	if err != nil {
		return err
	}
	_, err = png.WriteTo(w)
	return err
}

// segments splits a series into runs of consecutive epochs that have a value.
func segments(epochs []SimEpoch, value func(SimEpoch) (float64, bool)) []plotter.XYs {
	var out []plotter.XYs
	var cur plotter.XYs
	for _, e := range epochs {
		y, ok := value(e)
		if !ok {
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
			continue
		}
		cur = append(cur, plotter.XY{X: float64(e.Epoch), Y: y})
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// addSignals marks the epochs with a throttle signal.
func addSignals(p *plot.Plot, epochs []SimEpoch) error {
	var xys plotter.XYs
	for _, e := range epochs {
		if e.Signal {
			xys = append(xys, plotter.XY{X: float64(e.Epoch), Y: float64(e.Granted)})
		}
	}
	if len(xys) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(xys)
	if err != nil {
		return err
	}
	s.Color = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	s.Shape = draw.CrossGlyph{}
	s.Radius = vg.Points(5)
	p.Add(s)
	p.Legend.Add("throttle signal", s)
	return nil
}

func addSeries(p *plot.Plot, name string, c color.Color, glyph draw.GlyphDrawer, segs []plotter.XYs) error {
	for i, seg := range segs {
		line, points, err := plotter.NewLinePoints(seg)
		if err != nil {
			return err
		}
		line.Color = c
		line.Width = vg.Points(1.5)
		points.Color = c
		points.Shape = glyph
		p.Add(line, points)
		if i == 0 {
			p.Legend.Add(name, line, points)
		}
	}
	return nil
}
