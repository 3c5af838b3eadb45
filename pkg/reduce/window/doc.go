// Package window is event-time windowing for reduce vertices: which windows
// a message belongs to, and which windows a watermark closes.
//
// # Windows
//
// A [Window] is the event-time interval [Start, End). A [Strategy] assigns
// an event time to its windows: [Fixed] windows of one length that do not
// overlap, or [Sliding] windows of one length that start every slide, so
// that an event time falls in length/slide of them (rounded up). Both are
// aligned to the Unix epoch: a fixed window of a minute starts on a whole
// minute of Unix time, whatever the time a vertex starts.
//
// # Sessions
//
// [Session] windows are per key set and not aligned: a message at event
// time t opens the session [t, t+timeout), or joins an open session of its
// key set that [t, t+timeout) falls in or touches, and the session grows
// to cover it; sessions that come to touch merge into one, their items
// together. A session closes like any window, once the watermark reaches
// its end plus the allowed lateness; a message that joins no open session
// is late when its event time is behind the watermark less the allowed
// lateness.
//
// # Closing
//
// A [Book] keeps the windows open in one reader of a reduce vertex, and in
// each the items (messages) of each key set. The vertex's watermark says no
// message with an earlier event time is still to come; a window closes once
// the watermark reaches its end plus the allowed lateness, and
// [Book.Advance] returns the windows it closes in the order of their ends,
// each with its groups of items. A message whose windows have all closed
// is late ([Book.Add] says so): the vertex drops and counts it. The results
// of a window carry the event time [Window.ResultTime], its end less a
// millisecond.
//
// A Book is not safe for concurrent use: one reader owns it.
package window
