package watermarks

// fault is a deliberate bug that package tests switch on to show that the
// property checker catches it. Production trackers keep the zero value; the
// switch is only read off the per-record path (in Advance and pause decisions).
type fault int

const (
	faultNone              fault = iota
	faultSealEarly               // the global watermark runs one phase ahead of the live minimum
	faultGlobalDecreases         // the global watermark may move backwards
	faultGlobalMsDecreases       // the global time watermark may move backwards
	faultPauseMinHolder          // pause requests apply to the partition holding the minimum
	faultNeverIdle               // no partition is ever idle
	faultLeakBytes               // sealing a phase does not release its bytes
)
