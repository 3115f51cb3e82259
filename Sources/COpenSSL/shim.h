// OpenSSL 3 headers for Swift, plus static inline wrappers for the macros Swift cannot import.
#ifndef TAP_COPENSSL_SHIM_H
#define TAP_COPENSSL_SHIM_H
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

static inline long tap_BIO_get_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }
static inline void tap_OPENSSL_free(void *p) { OPENSSL_free(p); }
static inline int tap_EVP_PKEY_PUBLIC_KEY(void) { return EVP_PKEY_PUBLIC_KEY; }
static inline int tap_EVP_PKEY_KEYPAIR(void) { return EVP_PKEY_KEYPAIR; }
static inline int tap_EVP_PKEY_KEY_PARAMETERS(void) { return EVP_PKEY_KEY_PARAMETERS; }
static inline int tap_X509_V_OK(void) { return X509_V_OK; }
static inline STACK_OF(X509) *tap_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int tap_sk_X509_push(STACK_OF(X509) *s, X509 *x) { return sk_X509_push(s, x); }
static inline void tap_sk_X509_free(STACK_OF(X509) *s) { sk_X509_free(s); }
static inline STACK_OF(X509) *tap_X509_STORE_CTX_get1_chain(X509_STORE_CTX *c) { return X509_STORE_CTX_get1_chain(c); }
static inline int tap_sk_X509_num(STACK_OF(X509) *s) { return sk_X509_num(s); }
static inline X509 *tap_sk_X509_value(STACK_OF(X509) *s, int i) { return sk_X509_value(s, i); }
static inline void tap_sk_X509_pop_free(STACK_OF(X509) *s) { sk_X509_pop_free(s, X509_free); }

// TLS (used by the network layer).
static inline long tap_SSL_CTX_set_min_proto_version(SSL_CTX *c, int v) { return SSL_CTX_set_min_proto_version(c, v); }
static inline long tap_SSL_CTX_set_max_proto_version(SSL_CTX *c, int v) { return SSL_CTX_set_max_proto_version(c, v); }
static inline long tap_SSL_set_tlsext_host_name(SSL *s, const char *name) { return SSL_set_tlsext_host_name(s, name); }
static inline long tap_SSL_CTX_set_mode(SSL_CTX *c, long m) { return SSL_CTX_set_mode(c, m); }
static inline long tap_SSL_MODE_ENABLE_PARTIAL_WRITE(void) { return SSL_MODE_ENABLE_PARTIAL_WRITE; }
static inline long tap_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER(void) { return SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER; }
static inline long tap_SSL_CTX_set_tlsext_servername_callback(SSL_CTX *c, int (*cb)(SSL *, int *, void *)) {
    return SSL_CTX_set_tlsext_servername_callback(c, cb);
}
static inline long tap_SSL_CTX_set_tlsext_servername_arg(SSL_CTX *c, void *arg) { return SSL_CTX_set_tlsext_servername_arg(c, arg); }
static inline uint64_t tap_SSL_OP_NO_COMPRESSION(void) { return SSL_OP_NO_COMPRESSION; }
static inline int tap_BIO_pending(BIO *b) { return (int)BIO_pending(b); }
static inline long tap_BIO_set_mem_eof_return(BIO *b, long v) { return BIO_set_mem_eof_return(b, v); }
static inline long tap_SSL_CTX_set_session_cache_mode(SSL_CTX *c, long m) { return SSL_CTX_set_session_cache_mode(c, m); }
#endif
