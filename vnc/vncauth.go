package vnc

import (
	"crypto/des"
	"math/bits"
)

// RFC 6143 section 7.2.2, VNC Authentication: the server sends a 16-byte
// challenge and the client returns it DES-encrypted (two ECB blocks) with the
// password as the key. The password is cut to 8 bytes (QEMU's limit too),
// and, as every implementation does, each key byte has its bits reversed.

const vncAuthChallengeLen = 16

func vncAuthResponse(challenge []byte, password string) []byte {
	var key [8]byte
	copy(key[:], password)
	for i, b := range key {
		key[i] = bits.Reverse8(b)
	}
	block, err := des.NewCipher(key[:])
	if err != nil {
		// des.NewCipher fails only for a key that is not 8 bytes long.
		panic("vnc: des key: " + err.Error())
	}
	resp := make([]byte, vncAuthChallengeLen)
	block.Encrypt(resp[:8], challenge[:8])
	block.Encrypt(resp[8:], challenge[8:16])
	return resp
}
