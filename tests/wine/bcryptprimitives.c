/* Wine 8.0 (Debian 12) lacks bcryptprimitives.dll, whose ProcessPrng Rust's
 * standard library calls on Windows for random bytes (HashMap seeds). This
 * stand-in, placed beside wf.exe for the Wine check only, answers from
 * BCryptGenRandom, the system's preferred generator. Real Windows (10 and
 * later) has the DLL; nothing of wf ships this file.
 *
 *   x86_64-w64-mingw32-gcc -shared -O2 -o bcryptprimitives.dll bcryptprimitives.c -lbcrypt
 */
#include <windows.h>
#include <bcrypt.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (BCryptGenRandom(NULL, data, chunk, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0) {
            return FALSE;
        }
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
