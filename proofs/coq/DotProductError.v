(** L4 (proofs/dot-product-error.md) and the sum part of L3(b): the a priori
    error of a sum of products evaluated by ANY binary evaluation tree in
    binary64 round-to-nearest (A0.10): leaves are products rounded once, or
    exact zeros (accumulator initialisation, SIMD padding); inner nodes are
    rounded additions, or FMAs fl(x*y + t) whose addend t is a subtree.
    Any summation order, SIMD lanes, blocking and parallel reductions are
    such trees.  Underflow is included (absolute terms); overflow is excluded
    because the model FLT(-1074,53) has no overflow and the code rejects
    non-finite results (A0.6). *)
From Coq Require Import Reals Psatz ZArith Arith List.
From Flocq Require Import Core.
From Specbound Require Import Binary64.
Open Scope R_scope.

Inductive tree : Type :=
| Zero : tree                       (* an exact zero leaf *)
| Prod : R -> R -> tree             (* fl(x * y) *)
| Add : tree -> tree -> tree        (* fl(l + r) *)
| Fma : R -> R -> tree -> tree.     (* fl(x * y + t), one rounding *)

Fixpoint nprod (t : tree) : nat :=
  match t with
  | Zero => 0 | Prod _ _ => 1
  | Add a b => nprod a + nprod b
  | Fma _ _ a => S (nprod a)
  end.

(** exact value, sum of |products|, computed value *)
Fixpoint exact (t : tree) : R :=
  match t with
  | Zero => 0 | Prod x y => x * y
  | Add a b => exact a + exact b
  | Fma x y a => x * y + exact a
  end.

Fixpoint absum (t : tree) : R :=
  match t with
  | Zero => 0 | Prod x y => Rabs (x * y)
  | Add a b => absum a + absum b
  | Fma x y a => Rabs (x * y) + absum a
  end.

Fixpoint fl (t : tree) : R :=
  match t with
  | Zero => 0 | Prod x y => rnd (x * y)
  | Add a b => rnd (fl a + fl b)
  | Fma x y a => rnd (x * y + fl a)
  end.

(** Rounding depth: the largest number of roundings on a path from a
    product to the root.  An addition with a product-free operand adds an
    exact zero and does not round. *)
Fixpoint depth (t : tree) : nat :=
  match t with
  | Zero => 0 | Prod _ _ => 1
  | Add a b =>
      match nprod a, nprod b with
      | O, _ => depth b
      | _, O => depth a
      | _, _ => S (Nat.max (depth a) (depth b))
      end
  | Fma _ _ a => S (depth a)
  end.

Lemma fl_F64 : forall t, F64 (fl t).
Proof. destruct t; simpl; try apply F64_rnd. apply generic_format_0. Qed.

Lemma noprod_zero : forall t, nprod t = 0%nat -> fl t = 0 /\ exact t = 0 /\ absum t = 0.
Proof.
  induction t; simpl; intros H; try discriminate.
  - lra.
  - destruct (nprod t1) eqn:E1; destruct (nprod t2) eqn:E2; try discriminate.
    destruct IHt1 as (A1 & B1 & C1); auto. destruct IHt2 as (A2 & B2 & C2); auto.
    rewrite A1, A2, B1, B2, C1, C2, Rplus_0_r, round_0 by auto with typeclass_instances.
    lra.
Qed.

Lemma exact_le_absum : forall t, Rabs (exact t) <= absum t.
Proof.
  induction t; simpl.
  - rewrite Rabs_R0; lra.
  - lra.
  - eapply Rle_trans; [apply Rabs_triang|lra].
  - eapply Rle_trans; [apply Rabs_triang|lra].
Qed.

Lemma absum_nonneg : forall t, 0 <= absum t.
Proof. intros t. eapply Rle_trans; [apply Rabs_pos|apply exact_le_absum]. Qed.

Lemma pow_ge1 : forall n, 1 <= (1 + u) ^ n.
Proof. intros n. apply pow_R1_Rle. pose proof u_pos; lra. Qed.

Lemma pow_mono : forall m n, (m <= n)%nat -> (1 + u) ^ m <= (1 + u) ^ n.
Proof. intros. apply Rle_pow; auto. pose proof u_pos; lra. Qed.

(** The invariant, proved by induction over the tree:
    |fl(t) - t| <= ((1+u)^d - 1) * sum|p| + n * (1+u)^d * eta/2. *)
Theorem tree_error_invariant : forall t,
  Rabs (fl t - exact t) <=
    ((1 + u) ^ depth t - 1) * absum t + INR (nprod t) * (1 + u) ^ depth t * (eta / 2).
Proof.
  pose proof u_pos as Hu. pose proof eta_pos as He.
  induction t as [| x y | a IHa b IHb | x y a IHa].
  - simpl. rewrite Rminus_0_r, Rabs_R0. lra.
  - simpl. pose proof (abs_err_le (x * y)). assert (0 <= u * eta) by nra. lra.
  - simpl fl. simpl exact. simpl absum. simpl nprod.
    destruct (nprod a) eqn:Ea.
    + destruct (noprod_zero a Ea) as (A1 & B1 & C1).
      simpl depth. rewrite Ea. rewrite A1, B1, C1, Rplus_0_l, Rplus_0_l, Rplus_0_l.
      rewrite rnd_exact by apply fl_F64. simpl plus. exact IHb.
    + destruct (nprod b) eqn:Eb.
      * destruct (noprod_zero b Eb) as (A1 & B1 & C1).
        simpl depth. rewrite Ea, Eb. rewrite A1, B1, C1, !Rplus_0_r.
        rewrite rnd_exact by apply fl_F64. rewrite Nat.add_0_r. exact IHa.
      * simpl depth. rewrite Ea, Eb.
        set (da := depth a) in *. set (db := depth b) in *.
        set (d := Nat.max da db).
        destruct (rnd_add_model (fl a) (fl b) (fl_F64 a) (fl_F64 b)) as (del & Hd & Hr).
        rewrite Hr.
        set (Ea' := fl a - exact a). set (Eb' := fl b - exact b).
        replace ((fl a + fl b) * (1 + del) - (exact a + exact b))
          with ((Ea' + Eb') * (1 + del) + del * (exact a + exact b)) by (unfold Ea', Eb'; ring).
        assert (Pa : (1 + u) ^ da <= (1 + u) ^ d) by (apply pow_mono; lia).
        assert (Pb : (1 + u) ^ db <= (1 + u) ^ d) by (apply pow_mono; lia).
        assert (Ga := pow_ge1 da). assert (Gb := pow_ge1 db).
        assert (Sa := absum_nonneg a). assert (Sb := absum_nonneg b).
        assert (Xa := exact_le_absum a). assert (Xb := exact_le_absum b).
        assert (Na : 0 <= INR (S n)) by apply pos_INR.
        assert (Nb : 0 <= INR (S n0)) by apply pos_INR.
        rewrite plus_INR.
        simpl ((1 + u) ^ S d).
        assert (H1 : Rabs ((Ea' + Eb') * (1 + del)) <= (Rabs Ea' + Rabs Eb') * (1 + u)).
        { rewrite Rabs_mult. apply Rmult_le_compat; try apply Rabs_pos.
          apply Rabs_triang. eapply Rle_trans; [apply Rabs_triang|].
          rewrite Rabs_R1. lra. }
        assert (H2 : Rabs (del * (exact a + exact b)) <= u * (absum a + absum b)).
        { rewrite Rabs_mult. apply Rmult_le_compat; try apply Rabs_pos; auto.
          eapply Rle_trans; [apply Rabs_triang|lra]. }
        eapply Rle_trans; [apply Rabs_triang|].
        assert (K : (Rabs Ea' + Rabs Eb') * (1 + u) <=
          (((1 + u) ^ da - 1) * absum a + INR (S n) * (1 + u) ^ da * (eta / 2)
           + (((1 + u) ^ db - 1) * absum b + INR (S n0) * (1 + u) ^ db * (eta / 2))) * (1 + u)).
        { apply Rmult_le_compat_r; [lra|]. unfold Ea', Eb'. lra. }
        assert (K2 : ((1 + u) ^ da - 1) * absum a * (1 + u) + u * absum a
                     <= ((1 + u) * (1 + u) ^ d - 1) * absum a).
        { replace (((1 + u) ^ da - 1) * absum a * (1 + u) + u * absum a)
            with (((1 + u) * (1 + u) ^ da - 1) * absum a) by ring.
          apply Rmult_le_compat_r; [lra|].
          apply Rplus_le_compat_r, Rmult_le_compat_l; lra. }
        assert (K3 : ((1 + u) ^ db - 1) * absum b * (1 + u) + u * absum b
                     <= ((1 + u) * (1 + u) ^ d - 1) * absum b).
        { replace (((1 + u) ^ db - 1) * absum b * (1 + u) + u * absum b)
            with (((1 + u) * (1 + u) ^ db - 1) * absum b) by ring.
          apply Rmult_le_compat_r; [lra|].
          apply Rplus_le_compat_r, Rmult_le_compat_l; lra. }
        assert (K4 : INR (S n) * (1 + u) ^ da * (eta / 2) * (1 + u)
                     <= INR (S n) * ((1 + u) * (1 + u) ^ d) * (eta / 2)).
        { replace (INR (S n) * (1 + u) ^ da * (eta / 2) * (1 + u))
            with (INR (S n) * (eta / 2) * ((1 + u) * (1 + u) ^ da)) by ring.
          replace (INR (S n) * ((1 + u) * (1 + u) ^ d) * (eta / 2))
            with (INR (S n) * (eta / 2) * ((1 + u) * (1 + u) ^ d)) by ring.
          apply Rmult_le_compat_l; [nra|]. apply Rmult_le_compat_l; lra. }
        assert (K5 : INR (S n0) * (1 + u) ^ db * (eta / 2) * (1 + u)
                     <= INR (S n0) * ((1 + u) * (1 + u) ^ d) * (eta / 2)).
        { replace (INR (S n0) * (1 + u) ^ db * (eta / 2) * (1 + u))
            with (INR (S n0) * (eta / 2) * ((1 + u) * (1 + u) ^ db)) by ring.
          replace (INR (S n0) * ((1 + u) * (1 + u) ^ d) * (eta / 2))
            with (INR (S n0) * (eta / 2) * ((1 + u) * (1 + u) ^ d)) by ring.
          apply Rmult_le_compat_l; [nra|]. apply Rmult_le_compat_l; lra. }
        lra.
  - simpl fl. simpl exact. simpl absum. simpl nprod. simpl depth.
    set (da := depth a) in *.
    destruct (rnd_model (x * y + fl a)) as (del & e & Hd & Hee & _ & Hr).
    rewrite Hr.
    set (Ea' := fl a - exact a).
    replace ((x * y + fl a) * (1 + del) + e - (x * y + exact a))
      with (Ea' * (1 + del) + del * (x * y + exact a) + e) by (unfold Ea'; ring).
    assert (Ga := pow_ge1 da). assert (Sa := absum_nonneg a).
    assert (Xa := exact_le_absum a). assert (Pxy := Rabs_pos (x * y)).
    assert (Na : 0 <= INR (nprod a)) by apply pos_INR.
    rewrite S_INR. simpl ((1 + u) ^ S da).
    assert (H1 : Rabs (Ea' * (1 + del)) <= Rabs Ea' * (1 + u)).
    { rewrite Rabs_mult. apply Rmult_le_compat_l; [apply Rabs_pos|].
      eapply Rle_trans; [apply Rabs_triang|]. rewrite Rabs_R1. lra. }
    assert (H2 : Rabs (del * (x * y + exact a)) <= u * (Rabs (x * y) + absum a)).
    { rewrite Rabs_mult. apply Rmult_le_compat; try apply Rabs_pos; auto.
      eapply Rle_trans; [apply Rabs_triang|lra]. }
    assert (K : Rabs Ea' * (1 + u) <=
      (((1 + u) ^ da - 1) * absum a + INR (nprod a) * (1 + u) ^ da * (eta / 2)) * (1 + u)).
    { apply Rmult_le_compat_r; [lra|]. unfold Ea'. lra. }
    assert (K2 : u * Rabs (x * y) <= ((1 + u) * (1 + u) ^ da - 1) * Rabs (x * y)).
    { apply Rmult_le_compat_r; [apply Rabs_pos|]. nra. }
    assert (K4 : eta / 2 <= (1 + u) * (1 + u) ^ da * (eta / 2)).
    { apply Rle_trans with (1 * (eta / 2)); [lra|].
      apply Rmult_le_compat_r; nra. }
    eapply Rle_trans; [apply Rabs_triang|].
    eapply Rle_trans; [apply Rplus_le_compat_r; apply Rabs_triang|].
    lra.
Qed.

(** (1+u)^d <= 1/(1 - d u) = 1 + gamma_d when d u < 1. *)
Lemma pow_gamma : forall d, INR d * u < 1 -> (1 + u) ^ d * (1 - INR d * u) <= 1.
Proof.
  pose proof u_pos as Hu.
  induction d; intros H.
  - simpl. lra.
  - rewrite S_INR in *. simpl pow.
    assert (IH := IHd ltac:(pose proof (pos_INR d); nra)).
    assert (G := pow_ge1 d). pose proof (pos_INR d).
    assert (E : (1 + u) * (1 + u) ^ d * (1 - (INR d + 1) * u)
                = (1 + u) ^ d * (1 - INR d * u) - (1 + u) ^ d * (INR d + 1) * u * u) by ring.
    rewrite E. assert (0 <= (1 + u) ^ d * (INR d + 1) * u * u) by
      (repeat apply Rmult_le_pos; lra). lra.
Qed.

Lemma pow_le_gamma : forall d, INR d * u < 1 -> (1 + u) ^ d - 1 <= gamma d.
Proof.
  intros d H. unfold gamma. pose proof (pow_gamma d H).
  apply Rle_trans with (1 / (1 - INR d * u) - 1).
  - assert ((1 + u) ^ d <= 1 / (1 - INR d * u)).
    { unfold Rdiv. rewrite Rmult_1_l. apply Rmult_le_reg_r with (1 - INR d * u); [lra|].
      rewrite Rinv_l by lra. exact H0. }
    lra.
  - right. field. lra.
Qed.

Lemma gamma_mono : forall m n, (m <= n)%nat -> INR n * u < 1 -> gamma m <= gamma n.
Proof.
  intros m n Hmn H. unfold gamma. apply le_INR in Hmn. pose proof u_pos.
  pose proof (pos_INR m).
  unfold Rdiv. apply Rmult_le_compat; try nra.
  - apply Rlt_le, Rinv_0_lt_compat. nra.
  - apply Rinv_le_contravar; nra.
Qed.

Lemma depth_le_nprod : forall t, (depth t <= nprod t)%nat.
Proof.
  induction t; simpl; try lia.
  destruct (nprod t1) eqn:E1; destruct (nprod t2) eqn:E2; lia.
Qed.

(** L4, entrywise, blocked form: with d the rounding depth of the tree
    (d = min(k, b + c - 1) for the chunked product) and n the number of
    products, d u < 1/2 gives |fl - exact| <= gamma_d sum|p| + n eta. *)
Theorem dot_product_error_depth : forall t,
  INR (depth t) * u < / 2 ->
  Rabs (fl t - exact t) <= gamma (depth t) * absum t + INR (nprod t) * eta.
Proof.
  intros t H. pose proof (tree_error_invariant t) as I.
  assert (H1 : INR (depth t) * u < 1) by lra.
  pose proof (pow_le_gamma _ H1). pose proof (pow_gamma _ H1).
  assert (P2 : (1 + u) ^ depth t <= 2).
  { apply Rmult_le_reg_r with (1 - INR (depth t) * u); [lra|].
    apply Rle_trans with 1; [lra|]. lra. }
  pose proof (absum_nonneg t). pose proof (pos_INR (nprod t)). pose proof eta_pos.
  eapply Rle_trans; [exact I|].
  apply Rplus_le_compat; [apply Rmult_le_compat_r; lra|].
  assert (0 <= INR (nprod t) * (eta / 2)) by nra. nra.
Qed.

(** L4, entrywise: any order, FMA allowed, n products, n u < 1/2. *)
Theorem dot_product_error : forall t,
  INR (nprod t) * u < / 2 ->
  Rabs (fl t - exact t) <= gamma (nprod t) * absum t + INR (nprod t) * eta.
Proof.
  intros t H. pose proof (depth_le_nprod t) as Hd.
  assert (Hd' : INR (depth t) * u < / 2).
  { apply le_INR in Hd. pose proof u_pos. nra. }
  eapply Rle_trans; [apply (dot_product_error_depth t Hd')|].
  apply Rplus_le_compat_r, Rmult_le_compat_r; [apply absum_nonneg|].
  apply gamma_mono; auto. lra.
Qed.

(** The blocked form's depth count (dense::chunked_product): chunk trees
    P_1..P_c, each of depth at most b (a chunk of at most b products has
    depth at most b by [depth_le_nprod]), added in order with one rounded
    addition each, give a tree of depth at most b + c - 1. *)
Lemma depth_add_le : forall a b, (depth (Add a b) <= S (Nat.max (depth a) (depth b)))%nat.
Proof.
  intros a b. simpl. destruct (nprod a); destruct (nprod b); lia.
Qed.

Fixpoint chain (acc : tree) (ts : list tree) : tree :=
  match ts with
  | nil => acc
  | cons t rest => chain (Add acc t) rest
  end.

Lemma chain_depth_aux : forall ts acc b j,
  (depth acc <= b + j)%nat -> (forall t, In t ts -> (depth t <= b)%nat) ->
  (depth (chain acc ts) <= b + j + length ts)%nat.
Proof.
  induction ts as [| t rest IH]; intros acc b j Hacc Hts; simpl.
  - lia.
  - replace (b + j + S (length rest))%nat with (b + S j + length rest)%nat by lia.
    apply IH.
    + pose proof (depth_add_le acc t). pose proof (Hts t (or_introl eq_refl)). lia.
    + intros t' H. apply Hts. now right.
Qed.

Theorem chunked_depth : forall (p1 : tree) (ps : list tree) (b : nat),
  (depth p1 <= b)%nat -> (forall t, In t ps -> (depth t <= b)%nat) ->
  (depth (chain p1 ps) <= b + length ps)%nat.
Proof.
  intros p1 ps b H1 Hps. pose proof (chain_depth_aux ps p1 b 0 ltac:(lia) Hps). lia.
Qed.
