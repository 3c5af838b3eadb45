package simulate

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WriteScaledPNG writes a PNG chart of a scaled simulation in three
// panels: demand, pool and processed per epoch; the backlog; the replicas
// beside the replicas the pool keeps busy.
func WriteScaledPNG(w io.Writer, s Scaled, epochs []ScaledEpoch) error {
	series := func(v func(ScaledEpoch) float64) plotter.XYs {
		xys := make(plotter.XYs, len(epochs))
		for i, e := range epochs {
			xys[i] = plotter.XY{X: float64(e.Epoch), Y: v(e)}
		}
		return xys
	}
	blue := color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange := color.RGBA{R: 255, G: 127, B: 14, A: 255}
	grey := color.RGBA{R: 127, G: 127, B: 127, A: 255}
	green := color.RGBA{R: 44, G: 160, B: 44, A: 255}

	rates := panel(fmt.Sprintf("%s: min %d, max %d, ramp-up %v; a replica %d/s", s.Limit.Mode, s.Limit.Min, s.Limit.Max,
		s.Limit.RampUpDuration, s.ReplicaRate), "messages/s")
	backlog := panel("", "backlog")
	reps := panel("", "replicas")
	reps.X.Label.Text = "epoch (s)"
	for _, l := range []struct {
		p     *plot.Plot
		name  string
		c     color.Color
		xys   plotter.XYs
		steps bool
	}{
		{rates, "demand", grey, series(func(e ScaledEpoch) float64 { return float64(e.Demand) }), false},
		{rates, "pool", blue, series(func(e ScaledEpoch) float64 { return float64(e.PoolMilli) / 1000 }), false},
		{rates, "processed", orange, series(func(e ScaledEpoch) float64 { return float64(e.Processed) }), false},
		{backlog, "backlog", blue, series(func(e ScaledEpoch) float64 { return float64(e.Backlog) }), false},
		{reps, "fits: ceil(pool / replica rate)", grey, series(func(e ScaledEpoch) float64 { return float64(e.Fits) }), true},
		{reps, "replicas", green, series(func(e ScaledEpoch) float64 { return float64(e.Replicas) }), true},
	} {
		line, err := plotter.NewLine(l.xys)
		if err != nil {
			return err
		}
		line.Color, line.Width = l.c, vg.Points(1.5)
		if l.steps {
			line.StepStyle = plotter.PreStep
		}
		l.p.Add(line)
		l.p.Legend.Add(l.name, line)
	}
	rates.Y.Max = max(rates.Y.Max, float64(s.Limit.Max)) * 1.05
	const width, height = 8 * vg.Inch, 9 * vg.Inch
	img := vgimg.New(width, height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadX: vg.Points(4), PadY: vg.Points(8)}
	plots := [][]*plot.Plot{{rates}, {backlog}, {reps}}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// panel is one panel of a chart: a title, a y label, a grid, a legend at
// its top left, y from 0.
func panel(title, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = y
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return p
}
