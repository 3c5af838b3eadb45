package udf

// Forker is a [Mapper] that can make more of itself, for a forwarder that maps
// several batches at once (a streaming MonoVertex). Fork returns a Mapper that
// may map while this one and the other forks do; a fork that is an io.Closer
// is closed by whoever forked it, before the original. A Mapper that is not a
// Forker is called one batch at a time.
type Forker interface {
	Fork() Mapper
}

// Fork returns c: cat keeps no state.
func (c Cat) Fork() Mapper { return c }

// Fork returns f, which is safe for concurrent use.
func (f *Filter) Fork() Mapper { return f }

// Fork returns x, which is safe for concurrent use.
func (x *Extractor) Fork() Mapper { return x }

// Fork returns a chain of forks, or c itself when none of its mappers needs
// one.
func (c chain) Fork() Mapper {
	forked := make(chain, len(c))
	for i, m := range c {
		f, ok := m.(Forker)
		if !ok {
			return nil
		}
		forked[i] = f.Fork()
	}
	return forked
}
