package limiter

// AbandonSlots stops the slot keeper of l without giving its slots back,
// as the death of the process holding l would.
func AbandonSlots(l *Lease) {
	if l.slots != nil {
		l.slots.halt()
		l.slots = nil
	}
}
