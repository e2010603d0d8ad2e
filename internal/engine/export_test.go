package engine

// What the tests of package engine_test read of a Memo.

// Expectations returns the number of objects created and not seen yet.
func (m *Memo) Expectations() int { return m.count(func() int { return len(m.created) }) }

// Len returns the number of remembered objects.
func (m *Memo) Len() int { return m.count(func() int { return len(m.entries) }) }
