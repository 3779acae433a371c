// Two fatbinaries in `.nv_fatb` and their wrappers in `.nvFatBi` (the 8-byte names
// nvcc's Windows DLLs use), for x86-64 and AArch64 alike (make.sh).
        .section .nv_fatb,"dr"
        .p2align 3
fatbin_a:
        .incbin "../../nvfatbin/real2026/libcufft.ptx72.fatbin"
        .p2align 3
fatbin_b:
        .incbin "../../nvfatbin/real2026/libcufft.cubin112.fatbin"
        .section .nvFatBi,"dw"
        .p2align 3
        .long 0x466243B1
        .long 1
        .quad fatbin_a
        .quad 0
        .long 0x466243B1
        .long 1
        .quad fatbin_b
        .quad 0
