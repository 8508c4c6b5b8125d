package screenshot

// adlerBase is the Adler-32 modulus (RFC 1950, section 8.2).
const adlerBase = 65521

// adler32Combine returns the Adler-32 of A followed by B given adler32(A) a1,
// adler32(B) a2 and len(B) n, as zlib's adler32_combine does: parallel bands
// are checksummed separately and joined into the one sum zlib needs.
func adler32Combine(a1, a2 uint32, n int) uint32 {
	rem := uint64(n % adlerBase)
	s1a, s2a := uint64(a1&0xffff), uint64(a1>>16)
	s1b, s2b := uint64(a2&0xffff), uint64(a2>>16)
	// B's sums restart at 1 and 0; shifting A's in front adds A's s1 to
	// every running sum of B (n times) and to the total.
	s1 := (s1a + s1b + adlerBase - 1) % adlerBase
	s2 := (s2a + s2b + rem*s1a + adlerBase - rem) % adlerBase
	return uint32(s2<<16 | s1)
}
